"""path or serviceUrl (with authToken and tlsTrustCertsFilePath): where a query's topics are, checked before
anything is planned."""

from __future__ import annotations

import pytest

from pyspark_seglog.options import SinkOptions, SourceOptions
from pyspark_seglog.sessions import Location
from seglog.errors import InvalidArgumentError


def parse(**options):
    return SourceOptions.parse({"topic": "events", **options}, streaming=False).location


def test_a_data_directory_or_a_server():
    assert parse(path="/data") == Location(path="/data")
    assert parse(serviceUrl="http://10.0.0.5:8080/") == Location(service_url="http://10.0.0.5:8080")
    assert parse(serviceURL="https://h:8443", authToken="t0k", tlsTrustCertsFilePath="/ca.pem") == Location(
        service_url="https://h:8443", auth_token="t0k", trust_file="/ca.pem")
    assert SinkOptions.parse({"topic": "t", "serviceUrl": "http://h:1"}).location == Location(service_url="http://h:1")


@pytest.mark.parametrize("options, named, accepted", [
    ({}, "path", "the option path (a seglog data directory) or serviceUrl"),
    ({"path": "/data", "serviceUrl": "http://h:1"}, "serviceUrl", "either path"),
    ({"serviceUrl": "h:8080"}, "serviceUrl", "http://HOST:PORT or https://HOST:PORT"),
    ({"serviceUrl": "http://"}, "serviceUrl", "http://HOST:PORT"),
    ({"path": "/data", "authToken": "secret"}, "authToken", "only with serviceUrl"),
    ({"path": "/data", "tlsTrustCertsFilePath": "/ca.pem"}, "tlsTrustCertsFilePath", "only with serviceUrl"),
    ({"serviceUrl": "http://h:1", "tlsTrustCertsFilePath": "/ca.pem"}, "tlsTrustCertsFilePath", "https://"),
])
def test_bad_locations_name_the_option(options, named, accepted):
    with pytest.raises(InvalidArgumentError, match=f"invalid {named}") as raised:
        parse(**options)
    assert accepted in str(raised.value)
    assert "secret" not in str(raised.value)  # a token is never echoed
