from handoffd.cli import main

main()
