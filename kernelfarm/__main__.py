from kernelfarm.cli import main

main()
