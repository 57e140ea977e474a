/* bpe.c: byte-level BPE, minbpe's BasicTokenizer (train.h, "text"): the
 * learner and the encoder. bpe_text.c loads a text with it, reads and
 * writes its merges and decodes.
 *
 * No pre-split: the bytes are one sequence, so a token may span a space
 * ("e t"), as minbpe's BasicTokenizer's do (GPT-2's regex splits words
 * first). Merge k joins the adjacent pair (a, b) that occurs most often,
 * ties to the lowest (a, b), into token 256 + k; learning stops where no
 * pair occurs twice. The learner keeps the bytes as a linked list, each
 * pair's count and the places it starts at, and a max-heap of counts (stale
 * entries skipped when popped): a merge touches only its own places and
 * their two neighbours, never a full recount. */
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

/* (a, b) -> an index: open addressing, linear probing, at most half full */
typedef struct {
  uint64_t *key;
  int32_t *val;
  int64_t cap, used;
} map;

static uint64_t key_of(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

static int64_t slot(const map *m, uint64_t k) {
  int64_t i = (int64_t)((k * 0x9e3779b97f4a7c15ull) >> 32) & (m->cap - 1);
  while (m->val[i] >= 0 && m->key[i] != k) i = (i + 1) & (m->cap - 1);
  return i;
}

static int32_t map_get(const map *m, int32_t a, int32_t b) {
  return m->cap ? m->val[slot(m, key_of(a, b))] : -1;
}

static void map_put(map *m, int32_t a, int32_t b, int32_t v) {
  if (2 * (m->used + 1) > m->cap) {
    map old = *m;
    m->cap = old.cap ? 2 * old.cap : 1024;
    m->key = dt_host_alloc((size_t)m->cap, sizeof *m->key);
    m->val = dt_host_alloc((size_t)m->cap, sizeof *m->val);
    memset(m->val, 0xff, (size_t)m->cap * sizeof *m->val);
    for (int64_t i = 0; i < old.cap; i++)
      if (old.val[i] >= 0) {
        int64_t s = slot(m, old.key[i]);
        m->key[s] = old.key[i];
        m->val[s] = old.val[i];
      }
    free(old.key);
    free(old.val);
  }
  int64_t s = slot(m, key_of(a, b));
  m->used += m->val[s] < 0;
  m->key[s] = key_of(a, b);
  m->val[s] = v;
}

typedef struct {
  int32_t a, b;
  int64_t count, n, cap;
  int32_t *at; /* where it starts (stale places stay until its merge) */
} pair;
typedef struct {
  int64_t count;
  int32_t a, b, id;
} entry;
typedef struct {
  int32_t *tok, *next, *prev; /* the sequence; tok -1: merged into its left */
  pair *p;
  int64_t np, pcap, nh, hcap;
  int counted; /* past the first count, which pushes each pair once */
  entry *heap;
  map index;
} learner;

/* the heap's order: the larger count, then the lower (a, b) */
static int above(const entry *x, const entry *y) {
  return x->count != y->count ? x->count > y->count : x->a != y->a ? x->a < y->a : x->b < y->b;
}

static void push(learner *L, int32_t id) {
  if (L->nh == L->hcap) {
    L->hcap = L->hcap ? 2 * L->hcap : 1024;
    L->heap = realloc(L->heap, (size_t)L->hcap * sizeof *L->heap);
    CHECK_ALLOC(L->heap);
  }
  entry e = {L->p[id].count, L->p[id].a, L->p[id].b, id};
  int64_t i = L->nh++;
  for (; i > 0 && above(&e, &L->heap[(i - 1) / 2]); i = (i - 1) / 2)
    L->heap[i] = L->heap[(i - 1) / 2];
  L->heap[i] = e;
}

static entry pop(learner *L) {
  entry top = L->heap[0];
  entry last = L->heap[--L->nh];
  int64_t i = 0;
  for (int64_t c; (c = 2 * i + 1) < L->nh; i = c) {
    if (c + 1 < L->nh && above(&L->heap[c + 1], &L->heap[c])) c++;
    if (!above(&L->heap[c], &last)) break;
    L->heap[i] = L->heap[c];
  }
  L->heap[i] = last;
  return top;
}

/* the pair starting at place i gains (+1) or loses (-1) one occurrence */
static void count(learner *L, int64_t i, int delta) {
  int32_t a = L->tok[i], b = L->tok[L->next[i]], id = map_get(&L->index, a, b);
  if (id < 0) {
    if (L->np == L->pcap) {
      L->pcap = L->pcap ? 2 * L->pcap : 1024;
      L->p = realloc(L->p, (size_t)L->pcap * sizeof *L->p);
      CHECK_ALLOC(L->p);
    }
    L->p[L->np] = (pair){.a = a, .b = b};
    map_put(&L->index, a, b, id = (int32_t)L->np++);
  }
  pair *p = &L->p[id];
  p->count += delta;
  if (delta < 0) return; /* its heap entries are now above it: fixed when popped */
  if (p->n == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 4;
    p->at = realloc(p->at, (size_t)p->cap * sizeof *p->at);
    CHECK_ALLOC(p->at);
  }
  p->at[p->n++] = (int32_t)i;
  if (L->counted) push(L, id);
}

static int by_place(const void *x, const void *y) {
  int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
  return (a > b) - (a < b);
}

/* Merge k: every place of (a, b), left to right (so "aaa" is "Z a"). */
static void merge(learner *L, int32_t id, int32_t z) {
  int32_t a = L->p[id].a, b = L->p[id].b, *at = L->p[id].at;
  int64_t n = L->p[id].n;
  L->p[id].at = NULL; /* it never forms again: tokens only grow */
  L->p[id].n = L->p[id].cap = 0;
  qsort(at, (size_t)n, sizeof *at, by_place);
  for (int64_t k = 0; k < n; k++) {
    int32_t i = at[k], j = L->next[i];
    if (L->tok[i] != a || j < 0 || L->tok[j] != b) continue; /* gone since */
    int32_t left = L->prev[i], right = L->next[j];
    if (left >= 0) count(L, left, -1);
    if (right >= 0) count(L, j, -1);
    count(L, i, -1);
    L->tok[i] = z;
    L->tok[j] = -1;
    L->next[i] = right;
    if (right >= 0) L->prev[right] = i;
    if (left >= 0) count(L, left, 1);
    if (right >= 0) count(L, i, 1);
  }
  free(at);
}

int64_t dt_bpe_learn(const int32_t *bytes, int64_t n, int64_t merges, int32_t *pairs, int32_t *out,
                     int64_t *out_n) {
  learner L = {0};
  L.tok = dt_host_alloc((size_t)n + 1, sizeof *L.tok);
  L.next = dt_host_alloc((size_t)n + 1, sizeof *L.next);
  L.prev = dt_host_alloc((size_t)n + 1, sizeof *L.prev);
  for (int64_t i = 0; i < n; i++) {
    L.tok[i] = bytes[i];
    L.next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
    L.prev[i] = (int32_t)i - 1;
  }
  for (int64_t i = 0; i + 1 < n; i++) count(&L, i, 1);
  for (int64_t id = 0; id < L.np; id++) push(&L, (int32_t)id);
  L.counted = 1;
  int64_t k = 0;
  while (k < merges && L.nh) {
    entry e = pop(&L);
    int64_t now = L.p[e.id].count;
    if (now != e.count) { /* stale: its count fell since */
      if (now > 0) push(&L, e.id);
      continue;
    }
    if (now < 2) break; /* no pair occurs twice */
    pairs[2 * k] = e.a;
    pairs[2 * k + 1] = e.b;
    merge(&L, e.id, (int32_t)(256 + k++));
  }
  int64_t m = 0;
  for (int64_t i = n ? 0 : -1; i >= 0; i = L.next[i])
    if (out) out[m++] = L.tok[i];
  if (out_n) *out_n = m;
  for (int64_t id = 0; id < L.np; id++) free(L.p[id].at);
  free(L.tok);
  free(L.next);
  free(L.prev);
  free(L.p);
  free(L.heap);
  free(L.index.key);
  free(L.index.val);
  return k;
}

/* The encoder: the places of pairs that are merges in a min-heap by (the
 * merge's rank, place); popping merges them in learned order, each merge's
 * places left to right: minbpe's encode (the lowest-ranked pair first), in
 * n log n. A merge's new pairs hold its new token, so rank higher. */
typedef struct {
  int32_t rank, at;
} spot;

static int before(spot x, spot y) { return x.rank != y.rank ? x.rank < y.rank : x.at < y.at; }

static void spot_push(spot *h, int64_t *nh, spot s) {
  int64_t i = (*nh)++;
  for (; i > 0 && before(s, h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
  h[i] = s;
}

static spot spot_pop(spot *h, int64_t *nh) {
  spot top = h[0];
  spot last = h[--*nh];
  int64_t i = 0;
  for (int64_t c; (c = 2 * i + 1) < *nh; i = c) {
    if (c + 1 < *nh && before(h[c + 1], h[c])) c++;
    if (!before(h[c], last)) break;
    h[i] = h[c];
  }
  h[i] = last;
  return top;
}

int64_t dt_bpe_encode(const dt_vocab *v, const int32_t *bytes, int64_t n, int32_t *ids) {
  map rank = {0};
  for (int64_t k = 0; k < v->merges; k++)
    map_put(&rank, v->pair[2 * k], v->pair[2 * k + 1], (int32_t)k);
  int32_t *tok = dt_host_alloc((size_t)n + 1, sizeof *tok);
  int32_t *next = dt_host_alloc((size_t)n + 1, sizeof *next);
  int32_t *prev = dt_host_alloc((size_t)n + 1, sizeof *prev);
  spot *h = dt_host_alloc((size_t)(3 * n) + 1, sizeof *h); /* n at first, then 2 a merge */
  int64_t nh = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    tok[i] = bytes[i];
    next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
    prev[i] = (int32_t)i - 1;
  }
  for (int64_t i = 0, r; i + 1 < n; i++)
    if ((r = map_get(&rank, tok[i], tok[i + 1])) >= 0)
      spot_push(h, &nh, (spot){(int32_t)r, (int32_t)i});
  while (nh) {
    spot s = spot_pop(h, &nh);
    int32_t i = s.at, j = next[i], z = 256 + s.rank, r;
    if (tok[i] != v->pair[2 * s.rank] || j < 0 || tok[j] != v->pair[2 * s.rank + 1]) continue;
    tok[i] = z;
    tok[j] = -1;
    next[i] = next[j];
    if (next[i] >= 0) prev[next[i]] = i;
    if (prev[i] >= 0 && (r = map_get(&rank, tok[prev[i]], z)) >= 0)
      spot_push(h, &nh, (spot){r, prev[i]});
    if (next[i] >= 0 && (r = map_get(&rank, z, tok[next[i]])) >= 0) spot_push(h, &nh, (spot){r, i});
  }
  for (int64_t i = n ? 0 : -1; i >= 0; i = next[i]) ids[m++] = tok[i];
  free(tok);
  free(next);
  free(prev);
  free(h);
  free(rank.key);
  free(rank.val);
  return m;
}
