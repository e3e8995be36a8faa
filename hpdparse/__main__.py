"""`python -m hpdparse` runs the command line."""

from hpdparse.commands.main import main

if __name__ == "__main__":
    main()
