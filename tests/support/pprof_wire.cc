#include "tests/support/pprof_wire.h"

#include <zlib.h>

#include <string_view>
#include <tuple>
#include <utility>

#include "tests/support/files.h"

namespace dlprof::testing {
namespace {

class Wire {
 public:
  explicit Wire(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size() || failed_; }
  bool failed() const { return failed_; }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) break;
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    failed_ = true;
    return 0;
  }
  // The next field: its number, wire type, and its value (varint) or bytes.
  bool Next(uint32_t* field, uint32_t* type, uint64_t* value, std::string_view* bytes) {
    const uint64_t tag = Varint();
    if (failed_) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *type = static_cast<uint32_t>(tag & 7);
    switch (*type) {
      case 0: *value = Varint(); break;
      case 1: pos_ += 8; break;
      case 5: pos_ += 4; break;
      case 2: {
        const uint64_t n = Varint();
        if (failed_ || n > data_.size() - pos_) {
          failed_ = true;
          return false;
        }
        *bytes = data_.substr(pos_, n);
        pos_ += n;
        break;
      }
      default: failed_ = true; return false;
    }
    return !failed_ && pos_ <= data_.size();
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
  bool failed_ = false;
};

// A repeated scalar field, packed (wire type 2) or not (0).
void AppendScalars(uint32_t type, uint64_t value, std::string_view bytes, std::vector<uint64_t>* out) {
  if (type == 0) {
    out->push_back(value);
    return;
  }
  Wire w(bytes);
  while (!w.done()) out->push_back(w.Varint());
}

}  // namespace

std::string Gunzip(const std::string& in, std::string* error) {
  std::string ignored;
  if (error == nullptr) error = &ignored;
  error->clear();
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) {
    *error = "inflateInit2 failed";
    return "";
  }
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  char buf[1 << 16];
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  } while (rc == Z_OK);
  const bool trailing = rc == Z_STREAM_END && z.avail_in != 0;
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    *error = "gzip stream broken (inflate " + std::to_string(rc) + ")";
  } else if (trailing) {
    *error = "bytes after the gzip stream";
  }
  return out;
}

PProfile DecodePprof(const std::string& path) {
  PProfile p;
  const std::string gz = ReadFile(path);
  if (gz.empty()) {
    p.error = path + ": missing or empty";
    return p;
  }
  const std::string data = Gunzip(gz, &p.error);
  if (!p.error.empty()) return p;

  std::vector<std::string> strings;
  std::vector<std::pair<uint64_t, uint64_t>> sample_type_ids;
  struct RawLine { uint64_t function = 0; int64_t line = 0; };
  struct RawLocation { uint64_t mapping = 0, address = 0; std::vector<RawLine> lines; };
  struct RawFunction { uint64_t name = 0, system_name = 0, file = 0; int64_t start_line = 0; };
  struct RawSample {
    std::vector<uint64_t> locations, values;
    std::vector<std::tuple<uint64_t, uint64_t, int64_t, bool>> labels;  // key, str, num, is_str
  };
  std::map<uint64_t, RawLocation> locations;
  std::map<uint64_t, RawFunction> functions;
  std::map<uint64_t, uint64_t> mappings;  // id -> filename string
  std::vector<RawSample> samples;

  Wire top(data);
  uint32_t field, type;
  uint64_t value = 0;
  std::string_view bytes;
  while (!top.done() && top.Next(&field, &type, &value, &bytes)) {
    if (type != 2 && field != 0) continue;
    Wire m(bytes);
    uint32_t f, t;
    uint64_t v = 0;
    std::string_view b;
    switch (field) {
      case 1: {  // sample_type
        std::pair<uint64_t, uint64_t> vt{0, 0};
        while (!m.done() && m.Next(&f, &t, &v, &b)) {
          if (f == 1) vt.first = v;
          if (f == 2) vt.second = v;
        }
        sample_type_ids.push_back(vt);
        break;
      }
      case 2: {  // sample
        RawSample s;
        while (!m.done() && m.Next(&f, &t, &v, &b)) {
          if (f == 1) AppendScalars(t, v, b, &s.locations);
          if (f == 2) AppendScalars(t, v, b, &s.values);
          if (f == 3 && t == 2) {
            Wire l(b);
            uint32_t lf, lt;
            uint64_t lv = 0;
            std::string_view lb;
            uint64_t key = 0, str = 0;
            int64_t num = 0;
            bool is_str = false;
            while (!l.done() && l.Next(&lf, &lt, &lv, &lb)) {
              if (lf == 1) key = lv;
              if (lf == 2) str = lv, is_str = true;
              if (lf == 3) num = static_cast<int64_t>(lv);
            }
            s.labels.emplace_back(key, str, num, is_str);
          }
        }
        samples.push_back(std::move(s));
        break;
      }
      case 3: {  // mapping
        uint64_t id = 0, file = 0;
        while (!m.done() && m.Next(&f, &t, &v, &b)) {
          if (f == 1) id = v;
          if (f == 5) file = v;
        }
        mappings[id] = file;
        break;
      }
      case 4: {  // location
        uint64_t id = 0;
        RawLocation loc;
        while (!m.done() && m.Next(&f, &t, &v, &b)) {
          if (f == 1) id = v;
          if (f == 2) loc.mapping = v;
          if (f == 3) loc.address = v;
          if (f == 4 && t == 2) {
            Wire l(b);
            uint32_t lf, lt;
            uint64_t lv = 0;
            std::string_view lb;
            RawLine line;
            while (!l.done() && l.Next(&lf, &lt, &lv, &lb)) {
              if (lf == 1) line.function = lv;
              if (lf == 2) line.line = static_cast<int64_t>(lv);
            }
            loc.lines.push_back(line);
          }
        }
        locations[id] = std::move(loc);
        break;
      }
      case 5: {  // function
        uint64_t id = 0;
        RawFunction fn;
        while (!m.done() && m.Next(&f, &t, &v, &b)) {
          if (f == 1) id = v;
          if (f == 2) fn.name = v;
          if (f == 3) fn.system_name = v;
          if (f == 4) fn.file = v;
          if (f == 5) fn.start_line = static_cast<int64_t>(v);
        }
        functions[id] = fn;
        break;
      }
      case 6: strings.emplace_back(bytes); break;  // string_table
      default: break;
    }
    if (m.failed()) p.error = "corrupt message in field " + std::to_string(field);
  }
  if (top.failed()) p.error = "corrupt profile";
  auto str = [&](uint64_t i) { return i < strings.size() ? strings[i] : std::string("<bad string>"); };
  for (const auto& [type_id, unit] : sample_type_ids) p.sample_types.push_back(str(type_id));
  for (const auto& [id, fn] : functions) {
    p.functions[id] = PFunction{str(fn.name), str(fn.system_name), str(fn.file), fn.start_line};
  }
  for (const RawSample& rs : samples) {
    PSample s;
    for (uint64_t v : rs.values) s.values.push_back(static_cast<int64_t>(v));
    for (const auto& [key, sv, num, is_str] : rs.labels) {
      if (is_str) s.str_labels[str(key)] = str(sv);
      else s.num_labels[str(key)] = num;
    }
    for (uint64_t id : rs.locations) {
      auto loc = locations.find(id);
      if (loc == locations.end()) continue;
      const std::string module =
          mappings.count(loc->second.mapping) ? str(mappings[loc->second.mapping]) : "";
      if (loc->second.lines.empty()) s.frames.push_back(PFrame{nullptr, 0, module, loc->second.address});
      for (const RawLine& l : loc->second.lines) {
        auto fn = p.functions.find(l.function);
        s.frames.push_back(PFrame{fn == p.functions.end() ? nullptr : &fn->second, l.line, module,
                                  loc->second.address});
      }
    }
    p.samples.push_back(std::move(s));
  }
  return p;
}

}  // namespace dlprof::testing
