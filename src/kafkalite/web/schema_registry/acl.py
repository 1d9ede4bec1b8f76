"""Who may do what in the registry, with Kafka's ACLs (Kafka has no resource type for subjects): a
subject is checked as the TOPIC its name says (`orders-value` and `orders-key` -> `orders`; a subject
of another strategy, e.g. `shop.Order`, as a topic of its own name), global config and mode as CLUSTER.

Reads need DESCRIBE (implied by READ and WRITE), registering WRITE, deletes DELETE, a subject's
config and mode ALTER_CONFIGS / DESCRIBE_CONFIGS; a schema by id is readable when one of the subjects
using it is. Refusals answer 403 with Confluent's 40301.
"""

from __future__ import annotations

from aiohttp import web

from kafkalite.schemas.model import RegistryError
from kafkalite.schemas.registry import RegistryState
from kafkalite.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalite.web.rest._base import authorize, broker_of


def subject_topic(subject: str) -> str:
    """The topic a subject's ACLs are those of."""
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


def _denied(operation: AclOperation, what: str) -> RegistryError:
    return RegistryError(403, 40301, f"User is denied operation {operation.name} on {what}")


def may(request: web.Request, operation: AclOperation, subject: str) -> bool:
    if broker_of(request).authorizer is None:
        return True
    return authorize(request, operation, ResourceType.TOPIC, subject_topic(subject))


def require_subject(request: web.Request, operation: AclOperation, subject: str) -> None:
    if not may(request, operation, subject):
        raise _denied(operation, f"subject {subject}")


def require_cluster(request: web.Request, operation: AclOperation) -> None:
    if broker_of(request).authorizer is None:
        return
    if not authorize(request, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        raise _denied(operation, "the registry's global settings")


def require_schema(request: web.Request, state: RegistryState, schema_id: int) -> None:
    """A schema by id: readable when a subject using it (deleted ones included) is."""
    if broker_of(request).authorizer is None:
        return
    if not any(
        may(request, AclOperation.DESCRIBE, u.subject) for u in state.usages(schema_id, True)
    ):
        raise _denied(AclOperation.DESCRIBE, f"schema {schema_id}")
