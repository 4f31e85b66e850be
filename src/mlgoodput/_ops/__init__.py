"""Operations files shipped as package data: a Grafana dashboard and Prometheus rules."""
