// The `shardmart bench` shop mix for k6, the ecosystem's load tool (go install go.k6.io/k6@latest):
//
//   k6 run -e BASE_URL=http://localhost:8080 -e RATE=500 -e DURATION=60s -e ADMIN_TOKEN=... deploy/k6/shop.js
//   k6 run -e SCENARIO=flash-sale -e ADMIN_TOKEN=... deploy/k6/shop.js
//
// The server should run with its rate limits off (serve --limit-login-client 0
// --limit-login-account 0 --limit-sessions-client 0 --limit-events-session 0 --limit-events-client 0).
//
// Same mix as bench: browse and search 60 %, product page 15 %, cart 15 %, checkout 5 %,
// events 4.5 %, login 0.5 %; Zipf-skewed (s = 1.1) users, products and categories. The
// constant-arrival-rate executor is open loop, but k6 times each request from when it is sent,
// not from when it was due: a late iteration's wait is not in http_req_duration, only in
// dropped_iterations when no VU is free. bench measures from the due time; compare with that
// in mind. A 409 insufficient-stock on checkout is an expected answer (not a failure).
import http from 'k6/http';
import { check } from 'k6';
import { Counter } from 'k6/metrics';

const BASE = __ENV.BASE_URL || 'http://localhost:8080';
const SCENARIO = __ENV.SCENARIO || 'mix';
const ADMIN = __ENV.ADMIN_TOKEN || '';
const USERS = parseInt(__ENV.USERS || '200', 10);
const ZONE = __ENV.ZONE || 'eu-west';
const ZIPF_S = parseFloat(__ENV.ZIPF || '1.1');
const CATEGORIES = (__ENV.CATEGORIES || 'electronics,books,clothing,home,toys,sports,beauty,grocery,garden,automotive').split(',');
const FLASH_PRODUCTS = parseInt(__ENV.FLASH_PRODUCTS || '3', 10);
const FLASH_STOCK = parseInt(__ENV.FLASH_STOCK || '100', 10);

const MIX = [['browse', 30], ['search', 30], ['product', 15], ['cart', 15], ['checkout', 5], ['event', 4.5], ['login', 0.5]];
const FLASH_MIX = [['product', 40], ['cart', 30], ['checkout', 30]];

const soldOut = new Counter('checkout_sold_out');

export const options = {
  scenarios: {
    shop: {
      executor: 'constant-arrival-rate',
      rate: parseInt(__ENV.RATE || '200', 10),
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: parseInt(__ENV.VUS || '100', 10),
      maxVUs: parseInt(__ENV.MAX_VUS || '512', 10),
    },
  },
  // One tag per request kind, so each is reported separately next to the total.
  thresholds: {
    http_req_duration: ['p(99)<50'],
    http_req_failed: ['rate<0.01'],
    'http_req_duration{kind:browse}': ['p(99)<50'],
    'http_req_duration{kind:search}': ['p(99)<50'],
    'http_req_duration{kind:product}': ['p(99)<50'],
    'http_req_duration{kind:cart}': ['p(99)<50'],
    'http_req_duration{kind:checkout}': ['p(99)<50'],
    'http_req_duration{kind:event}': ['p(99)<50'],
    'http_req_duration{kind:login}': ['p(99)<200'],
  },
  summaryTrendStats: ['p(50)', 'p(95)', 'p(99)', 'p(99.9)', 'max'],
  setupTimeout: '300s',
};

// 409 is an expected answer for checkout (sold out): not a failed request.
const checkoutStatuses = http.expectedStatuses(201, 409);

function json(body) {
  return { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) };
}

function auth(token, extra) {
  return Object.assign({ Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, extra || {});
}

// zipf returns a sampler of ranks 0..n-1 with P(k) proportional to 1/(k+1)^s.
function zipf(n, s) {
  const cum = [];
  let total = 0;
  for (let k = 0; k < n; k++) {
    total += 1 / Math.pow(k + 1, s);
    cum.push(total);
  }
  return () => {
    const x = Math.random() * total;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cum[mid] < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

function picker(mix) {
  const total = mix.reduce((a, [, w]) => a + w, 0);
  return () => {
    let x = Math.random() * total;
    for (const [kind, w] of mix) {
      if ((x -= w) < 0) return kind;
    }
    return mix[mix.length - 1][0];
  };
}

function newSession() {
  const r = http.post(`${BASE}/v1/sessions`, null, { tags: { kind: 'login' } });
  check(r, { 'session created': (x) => x.status === 201 });
  return r.json('token');
}

function login(guest, user, tags) {
  const r = http.post(`${BASE}/v1/login`, JSON.stringify({ email: user.email, password: user.password }),
    { headers: auth(guest), tags });
  check(r, { 'logged in': (x) => x.status === 200 });
  return r.json('token');
}

// setup registers the users and finds (or, for the flash sale, creates) the products.
export function setup() {
  const run = `${Date.now().toString(16)}`;
  const users = [];
  for (let i = 0; i < USERS; i++) {
    const user = { email: `k6-${run}-${i}@example.com`, password: `k6-password-${run}` };
    const guest = newSession();
    const reg = http.post(`${BASE}/v1/users`, JSON.stringify(user), { headers: auth(guest) });
    if (reg.status !== 201) throw new Error(`register: ${reg.status} ${reg.body}`);
    user.token = login(guest, user, {});
    users.push(user);
  }
  let products = [];
  if (SCENARIO === 'flash-sale') {
    if (!ADMIN) throw new Error('the flash sale creates its products: set ADMIN_TOKEN');
    for (let k = 0; k < FLASH_PRODUCTS; k++) {
      const id = `k6-flash-${run}-${k}`;
      const r = http.post(`${BASE}/v1/products`, JSON.stringify({ id, name: `Flash deal ${k}`, category: CATEGORIES[0],
        price: '9.99', stock: { [ZONE]: FLASH_STOCK } }), { headers: { 'Content-Type': 'application/json', 'X-Admin-Token': ADMIN } });
      if (r.status !== 201) throw new Error(`create flash product: ${r.status} ${r.body}`);
      products.push(id);
    }
  } else {
    for (const c of CATEGORIES) {
      const r = http.get(`${BASE}/v1/products?category=${encodeURIComponent(c)}&limit=100`);
      products = products.concat((r.json('items') || []).map((p) => p.id));
    }
    // Popularity must not follow the listing's price order.
    for (let i = products.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [products[i], products[j]] = [products[j], products[i]];
    }
    if (ADMIN) {
      for (const id of products.slice(0, 200)) {
        http.post(`${BASE}/v1/products/${id}/stock`, JSON.stringify({ zone: ZONE, delta: 1000000 }),
          { headers: { 'Content-Type': 'application/json', 'X-Admin-Token': ADMIN } });
      }
    }
  }
  if (products.length === 0) throw new Error('no products');
  return { users, products, run };
}

let samplers = null;

export default function (data) {
  if (samplers === null) {
    samplers = {
      kind: picker(SCENARIO === 'flash-sale' ? FLASH_MIX : MIX),
      user: zipf(data.users.length, ZIPF_S),
      product: zipf(data.products.length, ZIPF_S),
      category: zipf(CATEGORIES.length, ZIPF_S),
    };
  }
  const kind = samplers.kind();
  const user = data.users[samplers.user()];
  const product = data.products[samplers.product()];
  const category = encodeURIComponent(CATEGORIES[samplers.category()]);
  const tags = { kind };
  let r;
  switch (kind) {
    case 'browse':
      r = http.get(`${BASE}/v1/products?category=${category}&limit=20`, { tags });
      check(r, { 'browse 200': (x) => x.status === 200 });
      break;
    case 'search': {
      const lo = [0, 10, 20, 50, 100][Math.floor(Math.random() * 5)];
      const hi = lo + [50, 100, 500][Math.floor(Math.random() * 3)];
      r = http.get(`${BASE}/v1/products?category=${category}&min_price=${lo}.00&max_price=${hi}.00&limit=20`, { tags });
      check(r, { 'search 200': (x) => x.status === 200 });
      break;
    }
    case 'product':
      r = http.get(`${BASE}/v1/products/${product}`, { tags });
      check(r, { 'product 200': (x) => x.status === 200 });
      break;
    case 'cart':
      r = http.put(`${BASE}/v1/cart/items/${product}`, JSON.stringify({ quantity: SCENARIO === 'flash-sale' ? 1 : 1 + Math.floor(Math.random() * 3) }),
        { headers: auth(user.token), tags });
      check(r, { 'cart 200': (x) => x.status === 200 });
      break;
    case 'checkout': {
      // One unit is put first, so the cart is never empty (VUs share no per-user cart state;
      // bench fills only an empty cart). That put is a cart edit: tagged as one, as bench
      // records it, so the checkout's figures are the order request's alone.
      http.put(`${BASE}/v1/cart/items/${product}`, JSON.stringify({ quantity: 1 }), { headers: auth(user.token), tags: { kind: 'cart' } });
      const key = `k6-${data.run}-${__VU}-${__ITER}`;
      r = http.post(`${BASE}/v1/orders`, JSON.stringify({ zone: ZONE }),
        { headers: auth(user.token, { 'Idempotency-Key': key }), tags, responseCallback: checkoutStatuses });
      if (r.status === 409 && String(r.json('type')).endsWith('/insufficient-stock')) {
        soldOut.add(1);
        const gone = r.json('product_id');
        if (gone) http.del(`${BASE}/v1/cart/items/${gone}`, null, { headers: auth(user.token), tags });
      } else {
        check(r, { 'checkout 201': (x) => x.status === 201 });
      }
      break;
    }
    case 'event':
      r = http.post(`${BASE}/v1/events`, JSON.stringify({ type: 'view', product_id: product }), { headers: auth(user.token), tags });
      check(r, { 'event 201': (x) => x.status === 201 });
      break;
    case 'login':
      login(newSession(), user, tags);
      break;
  }
}

// teardown reads the flash products' stock back: it must never be below zero.
export function teardown(data) {
  if (SCENARIO !== 'flash-sale') return;
  for (const id of data.products) {
    const stock = http.get(`${BASE}/v1/products/${id}`).json(`stock.${ZONE}`);
    check(stock, { 'flash sale not oversold (stock >= 0)': (s) => s >= 0 });
    console.log(`flash product ${id}: ${stock} of ${FLASH_STOCK} left`);
  }
}
