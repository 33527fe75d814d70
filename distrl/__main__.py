from distrl.cli import main

main()
