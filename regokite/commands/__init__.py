"""Process wiring behind the subcommands `cli` parses: each builds the runtime from its settings and runs it."""
