"""One module per `regokite` subcommand: its parser (`add_parser`) and its `run`, which wires what the command
calls and imports it only then; `options` holds the flags several commands share."""
