from clearance.cli import main

main()
