"""Programs: the command line and what it runs (the web console so far; the platform move
brings the CLI, worker, console and simulate here)."""
