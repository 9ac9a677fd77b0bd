"""The only code that talks to the API server: client, discovery, informers, work queue,
actuation, and the runtime that ties them to the pure controller decisions."""
