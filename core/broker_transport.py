"""kombu's Redis transport, with one fault turned into the connection error it is.

After a Redis restart, Celery's consumer closes its broken connection twice: ``collect()`` first (which
can close the transport, leaving it without its client), then ``close()``. Closing a channel that still
holds a delivered, unacknowledged message (an ``acks_late`` task in flight) then restores that message
through a new client pool, and building the pool read the host from the closed transport's client:
``AttributeError: 'NoneType' object has no attribute 'hostname'`` (the class of celery/kombu#582; kombu
5.7.0 here). Every caller on that path tolerates connection errors only (kombu's ``ignore_errors``,
``maybe_close_channel``, a message's ``ack_log_error``), so the AttributeError escaped and the
coordinator's Celery worker exited ("Unrecoverable error"); run_together then stopped the whole
coordinator (reproduced by tests/reliability/test_redis_restart.py). GPU workers on ``redis://`` use
this transport too; on ``rediss://`` and ``sentinel://`` nobody does (see core/celery_app.py).

Here a pool asked of a closed transport raises redis-py's ConnectionError instead: the close goes on,
the consumer reconnects as after any lost connection, and the unacknowledged message stays in Redis's
unacked set, from which kombu restores it once its visibility timeout has passed (the coordinator's
tasks are idempotent steps; its housekeeping re-advances every unfinished job anyway).

So does a pool asked of a closed channel, whose transport kombu sets to None: a producer that still
held one (a coordinator step dispatching its trials right after a restart) raised ``AttributeError:
'NoneType' object has no attribute 'client'`` from the check above, once in 100 restarts of a stress
run, and its step failed; as a connection error, kombu's publish retries on a new channel.

core/celery_app.py makes this the transport of ``redis://`` URLs (kombu resolves it on first connect, so
importing the app does not import this module).
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        # A closed channel has no transport (kombu sets it to None), a closed transport no client:
        # neither can give a new pool, and both are a lost connection to the callers on this path.
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the broker connection is closed (a Redis restart); reconnecting")
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)
        return params


class Transport(kombu_redis.Transport):
    Channel = Channel
