"""The fork server process: imports torch once and forks workers; it never holds anything of a run."""
