"""Filters for the operators' pages (relay/templates): the few they share with the HUD's come from
the same rule (relay.policy.links)."""

from django import template

from relay.policy import links

register = template.Library()


@register.filter
def short_sha(sha) -> str:
    return links.short_sha(str(sha or ""))
