"""Subscriptions and notifications: events are recorded once (relay.notify.events), matched to
subscriptions (relay.notify.subscriptions) and delivered through the outbox (relay.notify.delivery),
each event on its own or in a daily digest (relay.notify.digest)."""
