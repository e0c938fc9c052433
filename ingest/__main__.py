from ingest.cli.main import main

main()
