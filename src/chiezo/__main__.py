from chiezo.surfaces.cli.main import main

main()
