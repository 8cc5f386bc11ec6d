"""``python -m governor`` runs the command-line tool."""

from governor.cli import main

if __name__ == "__main__":
    main()
