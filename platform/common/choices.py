def choices(values) -> list[tuple[str, str]]:
    """Model and form choices from a sequence of values (or a StrEnum): each value is its own label."""
    return [(str(v), str(v)) for v in values]
