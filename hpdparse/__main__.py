"""`python -m hpdparse` runs the command line."""

from hpdparse.cli import main

if __name__ == "__main__":
    main()
