#!/bin/sh
# The README shopping flow: guest browse -> cart -> register/login (cart merge) -> order (idempotent)
# -> history -> status. Start a server first, e.g.
#   shardmart serve --addr 127.0.0.1:8080 --data-dir /tmp/walk --admin-token dev-admin-token --seed=false
# then: API=http://127.0.0.1:8080 ADMIN=dev-admin-token sh internal/httpapi/testdata/walkthrough.sh (needs curl, jq)
set -eu
API=${API:-http://127.0.0.1:8080}
ADMIN=${ADMIN:-dev-admin-token}
echo '## admin: create products'
curl -s -X POST $API/v1/products -H "X-Admin-Token: $ADMIN" -H 'Content-Type: application/json' \
  -d '{"id":"mug","name":"Mug","category":"kitchen","price":"12.50","stock":{"eu-west":10}}'
curl -s -X POST $API/v1/products -H "X-Admin-Token: $ADMIN" -H 'Content-Type: application/json' \
  -d '{"id":"pan","name":"Pan","category":"kitchen","price":"30.00","stock":{"eu-west":5}}'
echo '## guest: session, browse, cart'
TOKEN=$(curl -s -X POST $API/v1/sessions | jq -r .token)
curl -s "$API/v1/products?category=kitchen&min_price=10&max_price=40&limit=20"
curl -s $API/v1/products/mug
curl -s -X PUT $API/v1/cart/items/mug -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"quantity":2}'
curl -s -X PUT $API/v1/cart/items/pan -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"quantity":1}'
curl -s -X POST $API/v1/events -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"type":"add_to_cart","product_id":"pan"}'
curl -s $API/v1/cart -H "Authorization: Bearer $TOKEN"
echo '## register, login (guest cart merges into the user cart)'
curl -s -X POST $API/v1/users -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"email":"ann@example.com","password":"correct horse"}'
LOGIN=$(curl -s -X POST $API/v1/login -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"email":"ann@example.com","password":"correct horse"}')
echo "$LOGIN"
TOKEN=$(echo "$LOGIN" | jq -r .token) # login hands out a new token; the guest one is revoked
echo '## order (retry-safe with Idempotency-Key)'
curl -s -i -X POST $API/v1/orders -H "Authorization: Bearer $TOKEN" -H 'Idempotency-Key: 7d1c5e0a-order-1' -H 'Content-Type: application/json' -d '{"zone":"eu-west"}'
echo
curl -s -i -X POST $API/v1/orders -H "Authorization: Bearer $TOKEN" -H 'Idempotency-Key: 7d1c5e0a-order-1' -H 'Content-Type: application/json' -d '{"zone":"eu-west"}' | grep -i -E '^HTTP|replayed'
ORDER=$(curl -s "$API/v1/orders" -H "Authorization: Bearer $TOKEN" | jq -r '.items[0].id')
echo '## history, order page'
curl -s "$API/v1/orders?limit=10" -H "Authorization: Bearer $TOKEN"
curl -s $API/v1/orders/$ORDER -H "Authorization: Bearer $TOKEN"
echo '## admin: status'
curl -s -X POST $API/v1/orders/$ORDER/status -H "X-Admin-Token: $ADMIN" -H 'Content-Type: application/json' -d '{"status":"paid"}'
curl -s -X POST $API/v1/orders/$ORDER/status -H "X-Admin-Token: $ADMIN" -H 'Content-Type: application/json' -d '{"status":"created"}'
echo '## errors'
curl -s -X PUT $API/v1/cart/items/mug -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"quantity":2,"qty":1}'
curl -s "$API/v1/products?category=kitchen&limit=500"
