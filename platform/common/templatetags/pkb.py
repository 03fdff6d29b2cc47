"""Number formatting shared by every page."""

from numbers import Real

from django import template

register = template.Library()


def _number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


@register.filter
def speedup(value) -> str:
    return f"{value:.2f}×" if _number(value) else "–"


@register.filter
def us(value) -> str:
    if not _number(value):
        return "–"
    if value >= 10_000:
        return f"{value / 1000:,.1f} ms"
    return f"{value:,.1f} µs" if value >= 10 else f"{value:.2f} µs"


@register.filter
def pct(value) -> str:
    return f"{100 * value:.1f}%" if _number(value) else "–"


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None
