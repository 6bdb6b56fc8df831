// Events and metrics as msgpack records on bounded streams:
//   Event   [kRecordSchemaVersion, time_ms, kind, subject, message]
//   Metric  [kRecordSchemaVersion, time_ms, name, value]
// Decoding goes through the same checked reader as the tables' records (gcs/record_fields.h).
#include "gcs/events.h"

#include <chrono>

#include "gcs/record_fields.h"

namespace troupe::gcs {
using namespace record_detail;  // NOLINT: the helpers of this file

std::string encode_event(const Event& e) {
  return write([&](Packer& pk) {
    begin(pk, 4);
    pk.pack_int64(e.time_ms);
    put_str(pk, e.kind);
    put_str(pk, e.subject);
    put_str(pk, e.message);
  });
}

Status decode_event(const std::string& bytes, Event* out) {
  return read_record(bytes, "event", 4, out, [](Fields& f, Event& e) -> Status {
    TROUPE_RETURN_IF_ERROR(f.i64("time_ms", &e.time_ms));
    TROUPE_RETURN_IF_ERROR(f.str("kind", &e.kind));
    TROUPE_RETURN_IF_ERROR(f.str("subject", &e.subject));
    return f.str("message", &e.message);
  });
}

std::string encode_metric(const Metric& m) {
  return write([&](Packer& pk) {
    begin(pk, 3);
    pk.pack_int64(m.time_ms);
    put_str(pk, m.name);
    pk.pack_double(m.value);
  });
}

Status decode_metric(const std::string& bytes, Metric* out) {
  return read_record(bytes, "metric", 3, out, [](Fields& f, Metric& m) -> Status {
    TROUPE_RETURN_IF_ERROR(f.i64("time_ms", &m.time_ms));
    TROUPE_RETURN_IF_ERROR(f.str("name", &m.name));
    return f.f64("value", &m.value);
  });
}

namespace {

// The newest `count` entries of `stream`, decoded; an entry that does not decode fails the call
// naming the stream and the entry id.
template <class T, class Decode>
Expected<std::vector<T>> read_stream(Store& store, const char* stream, size_t count, Decode&& decode) {
  auto entries = store.read_recent(stream, count);
  if (!entries.ok()) return entries.status();
  std::vector<T> out;
  out.reserve(entries->size());
  for (const StreamEntry& e : *entries) {
    T value;
    Status st = decode(e.value, &value);
    if (!st.ok()) return st.with_context(std::string(stream) + " stream entry " + e.id);
    out.push_back(std::move(value));
  }
  return out;
}

}  // namespace

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Status record_event(Store& store, Event event) {
  if (event.time_ms == 0) event.time_ms = now_ms();
  const std::string bytes = encode_event(event);
  auto id = store.append(kEventStream, bytes, kEventStreamLength);
  if (!id.ok()) return id.status().with_context("recording event " + event.kind);
  return store.publish(kEventStream, bytes);
}

Expected<std::vector<Event>> recent_events(Store& store, size_t count) {
  return read_stream<Event>(store, kEventStream, count, decode_event);
}

Status record_metric(Store& store, Metric metric) {
  if (metric.time_ms == 0) metric.time_ms = now_ms();
  auto id = store.append(kMetricStream, encode_metric(metric), kEventStreamLength);
  if (!id.ok()) return id.status().with_context("recording metric " + metric.name);
  return {};
}

Expected<std::vector<Metric>> recent_metrics(Store& store, size_t count) {
  return read_stream<Metric>(store, kMetricStream, count, decode_metric);
}

}  // namespace troupe::gcs
