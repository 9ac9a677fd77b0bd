"""Watch, regokite's event-driven controller: `decisions` (the definition and the Rego contract: input,
patch, apply, delete, events, log), pure; `runner` (one informer per Watch, every event through the
policy, its writes through the actuator) carries them out."""
