"""The retention in force on a topic over REST (`GET .../retention?applied=true`): Pulsar's RetentionPolicies
and, beside them, the exact figures, which a topic's max_partition_size of '10 GB' (9536.74 MB) needs."""

import httpx

import seglog
from helpers_server import start_server


def test_the_applied_retention_of_a_topic_sized_in_gb_is_exact(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data, background=False) as log:
        log.create_topic("t", max_partition_size="10 GB")
    server = start_server(data)
    try:
        with httpx.Client(base_url=server.http_url, timeout=30) as http:
            response = http.get("/admin/v2/persistent/public/default/t/retention", params={"applied": "true"})
    finally:
        server.stop()
    assert response.status_code == 200, response.text
    assert response.json() == {"retentionTimeInMinutes": -1, "retentionSizeInMB": 9537, "retentionSizeInBytes": 10**10}
