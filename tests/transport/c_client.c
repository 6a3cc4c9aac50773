/* A client of libparity_transport.so written in plain C from parity/transport.h and
 * proto/parity/v1/parity.proto alone: it opens a session against a real parity-server, hands it
 * three aten::add.Tensor calls whose values it encodes itself (parity.v1.Value wire bytes, by
 * hand), and checks the verdicts: a right output passes, a wrong one is an error, a call whose
 * encoder fails is sent without values and skipped.
 *
 *   c_client PORT        exit 0 when every check holds; each failure printed */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/transport.h"

static int failures = 0;
#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "c_client: check failed at line %d: %s\n", __LINE__, #cond); \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

/* A growable byte buffer. */
typedef struct {
  char* data;
  size_t size, cap;
} buffer;

static void put(buffer* b, const void* bytes, size_t n) {
  if (b->size + n > b->cap) {
    b->cap = (b->size + n) * 2 + 64;
    b->data = (char*)realloc(b->data, b->cap);
  }
  memcpy(b->data + b->size, bytes, n);
  b->size += n;
}

static void put_varint(buffer* b, uint64_t v) {
  unsigned char c;
  while (v >= 0x80) {
    c = (unsigned char)((v & 0x7F) | 0x80);
    put(b, &c, 1);
    v >>= 7;
  }
  c = (unsigned char)v;
  put(b, &c, 1);
}

static void put_field(buffer* b, uint32_t field, const buffer* message) {
  put_varint(b, ((uint64_t)field << 3) | 2);
  put_varint(b, message->size);
  put(b, message->data, message->size);
}

/* Value{tensor: Tensor{dtype: FLOAT32, shape: [n], data: values}} */
static void put_tensor_value(buffer* out, uint32_t field, const float* values, size_t n) {
  buffer tensor = {0}, value = {0}, shape = {0};
  put_varint(&tensor, (1 << 3) | 0); /* dtype */
  put_varint(&tensor, 9);            /* DTYPE_FLOAT32 */
  put_varint(&shape, n);
  put_field(&tensor, 2, &shape); /* shape, packed */
  put_varint(&tensor, (4 << 3) | 2);
  put_varint(&tensor, n * sizeof(float)); /* data, little-endian (x86 and arm64 are) */
  put(&tensor, values, n * sizeof(float));
  put_field(&value, 1, &tensor);
  put_field(out, field, &value);
  free(tensor.data);
  free(value.data);
  free(shape.data);
}

typedef struct {
  float a[3], b[3], sum[3];
  int fail; /* the encoder fails */
  int released;
} add_call;

static void release_bytes(void* owner) { free(owner); }

static int encode_add(void* ctx, const parity_encode_limits* limits, const parity_blob_sink* sink,
                      parity_bytes* out, char* error, size_t error_size) {
  add_call* call = (add_call*)ctx;
  buffer fields = {0};
  buffer alpha = {0};
  (void)sink;
  if (limits->size < sizeof(parity_encode_limits) || limits->max_inline_tensor_bytes < 12) {
    snprintf(error, error_size, "limits too small");
    return 3;
  }
  if (call->fail) {
    snprintf(error, error_size, "inputs[0]: this client refuses to encode it");
    return 12;
  }
  put_tensor_value(&fields, 12, call->a, 3); /* ApiCall.inputs */
  put_tensor_value(&fields, 12, call->b, 3);
  put_varint(&alpha, (2 << 3) | 0); /* Value.int_value = 1: alpha */
  put_varint(&alpha, 1);
  put_field(&fields, 12, &alpha);
  free(alpha.data);
  put_tensor_value(&fields, 13, call->sum, 3); /* ApiCall.outputs */
  out->data = fields.data;
  out->size = fields.size;
  out->owner = fields.data;
  out->release = release_bytes;
  return 0;
}

static void release_add(void* ctx) { ((add_call*)ctx)->released++; }

static int capture_on = 0;
static void set_capture(void* ctx, int on, uint64_t pool) {
  (void)ctx;
  (void)pool;
  capture_on = on;
}

static void send_add(parity_session* s, add_call* call) {
  parity_call_site site;
  uint32_t flags = 0;
  parity_call* c;
  parity_values v;
  memset(&site, 0, sizeof(site));
  site.size = sizeof(site);
  site.op = "aten::add";
  site.overload = "Tensor";
  site.node = "";
  site.module = "c_client";
  site.node_sequence_nr = -1;
  site.forward_sequence_nr = -1;
  c = parity_call_begin(s, &site, &flags);
  CHECK(c != NULL);
  CHECK((flags & PARITY_CALL_WITH_VALUES) != 0);
  CHECK((flags & PARITY_CALL_RANDOM) == 0);
  if (c == NULL) return;
  CHECK(parity_session_admit(s, 64) == 1);
  memset(&v, 0, sizeof(v));
  v.size = sizeof(v);
  v.ctx = call;
  v.bytes = 36;
  v.encode = encode_add;
  v.release = release_add;
  parity_call_capture(c, &v);
}

int main(int argc, char** argv) {
  char config[512], error[256];
  parity_host host;
  parity_session* s;
  parity_counters counters;
  add_call right = {{1, 2, 3}, {4, 5, 6}, {5, 7, 9}, 0, 0};
  add_call wrong = {{1, 2, 3}, {4, 5, 6}, {5, 7, 10}, 0, 0};
  add_call refused = {{1, 2, 3}, {4, 5, 6}, {5, 7, 9}, 1, 0};
  if (argc != 2) {
    fprintf(stderr, "usage: c_client PORT\n");
    return 2;
  }
  CHECK(parity_transport_abi() == PARITY_TRANSPORT_ABI);
  printf("transport %s\n", parity_transport_version());

  /* A bad configuration is refused with a message, and no session. */
  s = parity_session_create("{\"task\": \"tensor\", \"tensor\": {\"port\": \"x\"}}", NULL, NULL,
                            error, sizeof(error));
  CHECK(s == NULL);
  CHECK(strstr(error, "port") != NULL);
  printf("refused: %s\n", error);

  snprintf(config, sizeof(config),
           "{\"task\": \"tensor\", \"level\": \"L1\", \"tensor\": {\"online_run_ut\": true, "
           "\"host\": \"127.0.0.1\", \"port\": %s}, \"parity\": {\"plaintext\": true, "
           "\"policy\": \"block\", \"connect_timeout_ms\": 20000}}",
           argv[1]);
  memset(&host, 0, sizeof(host));
  host.size = sizeof(host);
  host.framework_version = "none (plain C client)";
  host.device_type = "cpu";
  host.set_capture = set_capture;
  s = parity_session_create(config, NULL, &host, error, sizeof(error));
  CHECK(s != NULL);
  if (s == NULL) {
    fprintf(stderr, "c_client: %s\n", error);
    return 1;
  }
  parity_session_start(s);
  CHECK(capture_on == 1);
  CHECK(parity_session_capturing(s) == 1);
  send_add(s, &right);
  send_add(s, &wrong);
  send_add(s, &refused);
  CHECK(parity_session_flush(s, 60000) == 1);
  memset(&counters, 0, sizeof(counters));
  counters.size = sizeof(counters);
  parity_session_counters(s, &counters);
  printf("captured %llu sent %llu verdicts %llu: pass %llu error %llu skip %llu\n",
         (unsigned long long)counters.captured, (unsigned long long)counters.sent,
         (unsigned long long)counters.verdicts, (unsigned long long)counters.pass,
         (unsigned long long)counters.error, (unsigned long long)counters.skip);
  CHECK(counters.captured == 3);
  CHECK(counters.verdicts == 3);
  CHECK(counters.pass == 1);
  CHECK(counters.error == 1);
  CHECK(counters.skip == 1);
  CHECK(counters.unencodable == 1);
  parity_session_stop(s);
  CHECK(capture_on == 0);
  parity_session_destroy(s);
  /* Each call's values were released once. */
  CHECK(right.released == 1 && wrong.released == 1 && refused.released == 1);
  if (failures == 0) printf("c_client: every check held\n");
  return failures == 0 ? 0 : 1;
}
