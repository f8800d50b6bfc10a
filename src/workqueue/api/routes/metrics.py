"""`GET /metrics`: the app's Prometheus registry (`observability.service_metrics`)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.exposition import generate_latest

from workqueue.observability.service_metrics import ServiceMetrics

router = APIRouter(tags=["health"])


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    service_metrics: ServiceMetrics = request.app.state.metrics
    return Response(generate_latest(service_metrics.registry), media_type=CONTENT_TYPE_LATEST)
