"""Assets of ``clearance demo``: the scripted agent (``script.json``) and the small project
it works on (``workspace.json``, seeded into a temporary directory)."""
