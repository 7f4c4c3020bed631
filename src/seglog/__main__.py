"""`python -m seglog`: the seglog command line."""

from seglog.cli import main

if __name__ == "__main__":
    main(prog_name="seglog")
