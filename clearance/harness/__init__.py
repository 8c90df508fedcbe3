"""The runtime: tools, sessions, the pipeline, asks and the journal.

This package exports nothing itself: import from its public modules (``clearance``
re-exports the names most code needs).

- :mod:`clearance.harness.tools`: ``Tool``, ``ToolRegistry``, ``CallContext`` and handler
  results (``CallToolResult``, ``ToolImageResult``);
- :mod:`clearance.harness.session`: ``Harness``, ``Session``, ``AgentDefinition``;
- :mod:`clearance.harness.pipeline`: the ordered stages of one call;
- :mod:`clearance.harness.dispatch`: limits, ordering, timeouts and cancellation;
- :mod:`clearance.harness.approvals`: asks and their answers; :mod:`.grants` and
  :mod:`.grants_sqlite`: the grant stores;
- :mod:`clearance.harness.journal`: records, sinks and the events UIs subscribe to;
- :mod:`clearance.harness.providers`: ``Run`` and the scripted provider.
"""

__all__: list[str] = []
