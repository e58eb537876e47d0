"""The programs: the CLI, the LiveKit worker, the console, simulate and the web console."""
