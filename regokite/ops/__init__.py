"""Operations: structured logging, metrics, health."""
