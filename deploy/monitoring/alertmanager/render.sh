#!/bin/sh
# Renders alertmanager.yml for a deployment (Alertmanager does not expand environment variables):
#   SHARDMART_ALERT_EMAIL=dba@example.com SHARDMART_SMTP_SMARTHOST=mail.example.com:587 \
#     deploy/monitoring/alertmanager/render.sh > /etc/prometheus/alertmanager.yml
# Optional: SHARDMART_SMTP_FROM (default alertmanager@<host of the team address>),
# SHARDMART_SMTP_REQUIRE_TLS (default true; false for a relay without STARTTLS).
# Check the result with: amtool check-config /etc/prometheus/alertmanager.yml
set -eu
: "${SHARDMART_ALERT_EMAIL:?team e-mail address}"
: "${SHARDMART_SMTP_SMARTHOST:?SMTP smarthost host:port}"
from=${SHARDMART_SMTP_FROM:-alertmanager@${SHARDMART_ALERT_EMAIL#*@}}
tls=${SHARDMART_SMTP_REQUIRE_TLS:-true}
case $tls in true | false) ;; *) echo "SHARDMART_SMTP_REQUIRE_TLS: want true or false, got $tls" >&2; exit 2 ;; esac
for v in "$SHARDMART_ALERT_EMAIL" "$SHARDMART_SMTP_SMARTHOST" "$from"; do
  # The values go into single-quoted YAML and a sed replacement.
  case $v in *[\'\|\&\\]* | *[[:space:]]*) echo "refusing value with quote, |, &, \\ or space: $v" >&2; exit 2 ;; esac
done
sed -e "s|'team@shardmart.invalid'|'$SHARDMART_ALERT_EMAIL'|" \
  -e "s|'smtp.shardmart.invalid:587'|'$SHARDMART_SMTP_SMARTHOST'|" \
  -e "s|'alertmanager@shardmart.invalid'|'$from'|" \
  -e "s|smtp_require_tls: true|smtp_require_tls: $tls|" \
  "$(dirname "$0")/alertmanager.yml"
