// safetensors writer and validating reader (header length, JSON header, dtypes, shapes, offsets, coverage).
#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <set>
#include <system_error>

#include "core/atomic_file.h"
#include "core/device_copy.h"
#include "core/error.h"
#include "core/json.h"
#include "core/storage.h"

namespace uoe::safetensors {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit

struct DTypeEntry {
  const char* name;
  DType dtype;
};
constexpr DTypeEntry kDTypes[] = {{"F32", DType::Float32}, {"F64", DType::Float64}, {"BF16", DType::BFloat16},
                                  {"F16", DType::Float16}, {"I32", DType::Int32},   {"I64", DType::Int64},
                                  {"BOOL", DType::Bool}};

const char* st_dtype_name(DType t) {
  for (const auto& e : kDTypes)
    if (e.dtype == t) return e.name;
  fail("[safetensors] dtype ", dtype_name(t), " has no safetensors name");
}

// One tensor as described by the header.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

struct Header {
  std::vector<Entry> entries;  // header order
  std::map<std::string, std::string> metadata;
};

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string show(const json::Value& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

Entry parse_entry(const std::string& name, const json::Value& v, uint64_t buffer_size, const std::string& src) {
  const std::string where = "[safetensors] " + src + ": tensor " + quoted(name);
  UOE_CHECK(v.is_object(), where, ": expected an object with dtype, shape and data_offsets, got ", show(v));
  Entry e;
  e.name = name;

  UOE_CHECK(v.contains("dtype"), where, ": missing field \"dtype\"");
  const json::Value& dt = v.at("dtype");
  UOE_CHECK(dt.is_string(), where, ": field \"dtype\" must be a string, got ", show(dt));
  const auto it = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                               [&](const DTypeEntry& d) { return dt.as_string() == d.name; });
  UOE_CHECK(it != std::end(kDTypes), where, ": unsupported dtype ", quoted(dt.as_string()),
            " (supported: F32, F64, BF16, F16, I32, I64, BOOL)");
  e.dtype = it->dtype;

  UOE_CHECK(v.contains("shape"), where, ": missing field \"shape\"");
  const json::Value& sh = v.at("shape");
  UOE_CHECK(sh.is_array(), where, ": field \"shape\" must be an array of non-negative integers, got ", show(sh));
  // The product of the non-zero dims must fit int64 (a tensor's strides are products of its dims, zero or not).
  unsigned __int128 extent = 1;  // saturates past INT64_MAX
  bool empty = false;
  for (const json::Value& d : sh.as_array()) {
    UOE_CHECK(d.is_integer() && d.as_double() >= 0 && d.as_uint() <= uint64_t(INT64_MAX), where,
              ": field \"shape\" must hold non-negative integers, got ", show(sh));
    e.shape.push_back(int64_t(d.as_uint()));
    empty = empty || d.as_uint() == 0;
    if (d.as_uint() > 0) extent = std::min<unsigned __int128>(extent * d.as_uint(), (unsigned __int128)INT64_MAX + 1);
  }
  UOE_CHECK(extent <= (unsigned __int128)INT64_MAX, where, ": shape ", shape_str(e.shape),
            ": the product of its non-zero dims (which sets its strides) overflows int64");
  const unsigned __int128 numel = empty ? 0 : extent;

  UOE_CHECK(v.contains("data_offsets"), where, ": missing field \"data_offsets\"");
  const json::Value& off = v.at("data_offsets");
  UOE_CHECK(off.is_array() && off.size() == 2 && off.as_array()[0].is_integer() && off.as_array()[1].is_integer() &&
                off.as_array()[0].as_double() >= 0 && off.as_array()[1].as_double() >= 0,
            where, ": field \"data_offsets\" must be [begin, end] with non-negative integers, got ", show(off));
  e.begin = off.as_array()[0].as_uint();
  e.end = off.as_array()[1].as_uint();
  UOE_CHECK(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end, "] has begin > end");
  UOE_CHECK(e.end <= buffer_size, where, ": data_offsets [", e.begin, ", ", e.end,
            "] go past the end of the data buffer (", buffer_size, " bytes; truncated file?)");
  const unsigned __int128 nbytes = numel * dtype_size(e.dtype);
  UOE_CHECK(nbytes == e.end - e.begin, where, ": shape ", shape_str(e.shape), " of ", it->name, " needs ",
            uint64_t(std::min<unsigned __int128>(nbytes, UINT64_MAX)), " bytes but data_offsets [", e.begin, ", ",
            e.end, "] hold ", e.end - e.begin);
  return e;
}

Header parse_header(const std::string& text, uint64_t buffer_size, const std::string& src) {
  UOE_CHECK(!text.empty() && text[0] == '{', "[safetensors] ", src,
            ": the header does not start with '{' (not a safetensors file?)");
  json::Value root;
  try {
    root = json::parse(text, src + " header");
  } catch (const Error& err) {
    fail("[safetensors] ", src, ": the header is not valid JSON: ", err.what());
  }
  UOE_CHECK(root.is_object(), "[safetensors] ", src, ": the header must be a JSON object");
  Header h;
  for (const auto& [key, v] : root.items()) {
    if (key == "__metadata__") {
      UOE_CHECK(v.is_object(), "[safetensors] ", src, ": \"__metadata__\" must be an object of strings, got ",
                show(v));
      for (const auto& [mk, mv] : v.items()) {
        UOE_CHECK(mv.is_string(), "[safetensors] ", src, ": \"__metadata__\" field ", quoted(mk),
                  " must be a string, got ", show(mv));
        h.metadata[mk] = mv.as_string();
      }
      continue;
    }
    h.entries.push_back(parse_entry(key, v, buffer_size, src));  // duplicate keys were refused by the parser
  }

  // The tensors must tile the buffer: sorted by offset, each begins where the previous ends.
  std::vector<size_t> order(h.entries.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Entry &x = h.entries[a], &y = h.entries[b];
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (size_t i : order) {
    const Entry& e = h.entries[i];
    if (e.begin < covered)
      fail("[safetensors] ", src, ": tensor ", quoted(e.name), " data_offsets [", e.begin, ", ", e.end,
           "] overlap tensor ", quoted(prev->name), " [", prev->begin, ", ", prev->end, "]");
    if (e.begin > covered)
      fail("[safetensors] ", src, ": tensor ", quoted(e.name), " data_offsets [", e.begin, ", ", e.end,
           "] leave a gap of ", e.begin - covered, " bytes after ",
           prev ? "tensor " + quoted(prev->name) : std::string("the start of the buffer"));
    covered = e.end;
    if (e.end > e.begin || !prev) prev = &e;
  }
  UOE_CHECK(covered == buffer_size, "[safetensors] ", src, ": the data buffer has ", buffer_size,
            " bytes but the tensors cover ", covered, " (", buffer_size - covered, " bytes belong to no tensor)");
  return h;
}

// A whole file mapped copy-on-write (its pages are read when first touched), unmapped when the last tensor that
// views it dies.
struct Mapping {
  void* base = MAP_FAILED;
  size_t size = 0;
  Mapping(int fd, size_t bytes) : size(bytes) {
    if (bytes > 0) base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  }
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, size);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  bool ok() const { return base != MAP_FAILED; }
};

// Decodes a file of `file_size` bytes whose bytes come from `read_at(offset, n, dst)`. With a mapping of the
// file, the tensors are views of it instead of copies.
File decode(uint64_t file_size, const std::function<void(uint64_t, size_t, void*)>& read_at, const std::string& src,
            const std::shared_ptr<Mapping>& mapping = nullptr) {
  UOE_CHECK(file_size >= 8, "[safetensors] ", src, ": the file has ", file_size,
            " bytes, too few for the 8-byte header length (truncated or not a safetensors file)");
  unsigned char prefix[8];
  read_at(0, 8, prefix);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  UOE_CHECK(n <= file_size - 8, "[safetensors] ", src, ": the header length ", n, " exceeds the ", file_size - 8,
            " bytes that follow the length prefix (truncated or not a safetensors file)");
  UOE_CHECK(n <= kMaxHeaderBytes, "[safetensors] ", src, ": the header length ", n, " exceeds the limit of ",
            kMaxHeaderBytes, " bytes");
  std::string text(size_t(n), '\0');
  if (n) read_at(8, size_t(n), text.data());
  const uint64_t data_start = 8 + n;
  Header h = parse_header(text, file_size - data_start, src);

  File f;
  f.source = src;
  f.metadata = std::move(h.metadata);
  f.tensors.reserve(h.entries.size());
  for (const Entry& e : h.entries) {
    const size_t nbytes = size_t(e.end - e.begin);
    Tensor t;
    // A view must be aligned to its element size. The format does not require the header to be padded (uoe's
    // writer and the reference one pad it to 8, other writers may not), and a 1-byte tensor can precede a wider one:
    // such a tensor is read into memory instead (the mapping is page-aligned, so the file offset decides).
    if (mapping && (data_start + e.begin) % dtype_size(e.dtype) == 0) {
      void* data = static_cast<char*>(mapping->base) + data_start + e.begin;
      t = make_tensor(std::make_shared<Storage>(data, nbytes, Device::cpu(), [mapping] {}), e.shape,
                      contiguous_strides(e.shape), 0, e.dtype);
    } else {
      t = empty(e.shape, TensorOptions{}.with_dtype(e.dtype));
      if (nbytes) read_at(data_start + e.begin, nbytes, t.raw_data());
    }
    if (e.dtype == DType::Bool) {
      const auto* b = static_cast<const unsigned char*>(t.raw_data());
      for (size_t i = 0; i < nbytes; ++i)
        UOE_CHECK(b[i] <= 1, "[safetensors] ", src, ": tensor ", quoted(e.name), ": BOOL element ", i, " is byte ",
                  unsigned(b[i]), ", expected 0 or 1");
    }
    f.tensors.push_back({e.name, std::move(t)});
  }
  return f;
}

// A file about to be written: its header (padded) and the order of the tensors in its buffer.
struct Layout {
  std::string header;
  std::vector<size_t> order;
  uint64_t file_size = 0;
};

uint64_t nbytes_of(const Tensor& t) { return uint64_t(t.numel()) * t.itemsize(); }
uint64_t nbytes_of(const DeferredTensor& t) { return uint64_t(shape_numel(t.shape)) * dtype_size(t.dtype); }

DeferredTensors deferred(const std::vector<Named>& tensors) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (const Named& nt : tensors) {
    UOE_CHECK(nt.tensor.defined(), "[safetensors] serialize: tensor ", quoted(nt.name), " is undefined");
    named.emplace_back(nt.name, nt.tensor);
  }
  return defer(named);
}

// Buffer order: largest element size first (stable), so every tensor is aligned to its element size.
std::vector<size_t> buffer_order(const DeferredTensors& tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return dtype_size(tensors[a].dtype) > dtype_size(tensors[b].dtype); });
  return order;
}

// Checks the names and lays the tensors out, from their dtypes and shapes alone (no data is read).
Layout plan(const DeferredTensors& tensors, const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  for (const DeferredTensor& nt : tensors) {
    UOE_CHECK(!nt.name.empty(), "[safetensors] serialize: a tensor has an empty name");
    UOE_CHECK(nt.name != "__metadata__", "[safetensors] serialize: \"__metadata__\" cannot name a tensor");
    UOE_CHECK(seen.insert(nt.name).second, "[safetensors] serialize: duplicate tensor name ", quoted(nt.name));
  }

  Layout l;
  l.order = buffer_order(tensors);
  std::vector<uint64_t> begin(tensors.size());
  uint64_t total = 0;
  for (size_t i : l.order) {
    begin[i] = total;
    total += nbytes_of(tensors[i]);
  }

  json::Value root = json::Value::object();
  json::Value& meta = root["__metadata__"];
  meta = json::Value::object();
  const auto fmt = metadata.find("format");
  meta["format"] = fmt != metadata.end() ? fmt->second : std::string("pt");
  for (const auto& [k, v] : metadata)
    if (k != "format") meta[k] = v;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const DeferredTensor& t = tensors[i];
    json::Value entry = json::Value::object();
    entry["dtype"] = st_dtype_name(t.dtype);
    json::Value shape = json::Value::array();
    for (int64_t d : t.shape) shape.push_back(d);
    entry["shape"] = std::move(shape);
    json::Value offsets = json::Value::array();
    offsets.push_back(begin[i]);
    offsets.push_back(begin[i] + nbytes_of(t));
    entry["data_offsets"] = std::move(offsets);
    root[tensors[i].name] = std::move(entry);
  }
  try {
    l.header = root.dump();
  } catch (const Error& err) {
    fail("[safetensors] serialize: cannot write the header: ", err.what());
  }
  l.header.append((8 - l.header.size() % 8) % 8, ' ');  // the buffer starts 8-byte aligned
  l.file_size = 8 + l.header.size() + total;
  return l;
}

// The tensor `d` produces, checked against its declared dtype and shape.
Tensor produce(const DeferredTensor& d) {
  const Tensor t = d.produce();
  UOE_CHECK(t.defined() && t.dtype() == d.dtype && t.shape() == d.shape, "[safetensors] tensor ", quoted(d.name),
            " was declared ", dtype_name(d.dtype), shape_str(d.shape), " but produced ",
            t.defined() ? dtype_name(t.dtype()) + shape_str(t.shape()) : std::string("an undefined tensor"));
  return t.detach();
}

// The file's bytes in order: header length, header, then each tensor, produced and copied to the CPU when its
// turn comes, so at most one tensor is held at a time.
void write_file(const DeferredTensors& tensors, const Layout& l, const ByteSink& sink) {
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = (uint64_t(l.header.size()) >> (8 * i)) & 0xFF;
  sink(prefix, 8);
  sink(l.header.data(), l.header.size());
  for (size_t i : l.order) {
    const Tensor t = host_contiguous(produce(tensors[i]));
    if (t.numel()) sink(t.raw_data(), size_t(nbytes_of(t)));
  }
}

}  // namespace

std::string serialize(const std::vector<Named>& tensors, const std::map<std::string, std::string>& metadata) {
  const DeferredTensors d = deferred(tensors);
  const Layout l = plan(d, metadata);
  std::string out;
  out.reserve(size_t(l.file_size));
  write_file(d, l, [&](const void* data, size_t size) { out.append(static_cast<const char*>(data), size); });
  return out;
}

void save(const std::string& path, const std::vector<Named>& tensors, const std::map<std::string, std::string>& metadata) {
  DeferredTensors d;
  try {
    d = deferred(tensors);
  } catch (const Error& err) {
    fail("[safetensors] cannot save '", path, "': ", err.what());
  }
  save(path, d, metadata);
}

void save(const std::string& path, const DeferredTensors& tensors, const std::map<std::string, std::string>& metadata) {
  Layout l;
  try {
    l = plan(tensors, metadata);
  } catch (const Error& err) {
    fail("[safetensors] cannot save '", path, "': ", err.what());
  }
  write_file_atomic(path, [&](const ByteSink& sink) { write_file(tensors, l, sink); });
}

void produce_in_save_order(const DeferredTensors& tensors) {
  for (size_t i : buffer_order(tensors)) produce(tensors[i]);
}

File deserialize(const std::string& bytes, const std::string& source) {
  return decode(
      bytes.size(), [&](uint64_t off, size_t n, void* dst) { std::memcpy(dst, bytes.data() + off, n); }, source);
}

File load(const std::string& path) {
  const int fd = open_regular_file(path);  // a FIFO is refused, not waited on
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  UOE_CHECK(::fstat(fd, &st) == 0, "[safetensors] cannot stat '", path, "': ", std::system_category().message(errno));
  const auto read_at = [&](uint64_t off, size_t n, void* dst) {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t r = ::pread(fd, p, n, off_t(off));
      if (r < 0 && errno == EINTR) continue;
      UOE_CHECK(r >= 0, "[safetensors] ", path, ": read failed: ", std::system_category().message(errno));
      UOE_CHECK(r > 0, "[safetensors] ", path, ": the file ended early (was it truncated while reading?)");
      p += r;
      off += uint64_t(r);
      n -= size_t(r);
    }
  };
  auto mapping = std::make_shared<Mapping>(fd, size_t(st.st_size));
  return decode(uint64_t(st.st_size), read_at, path, mapping->ok() ? mapping : nullptr);
}

const Tensor& File::get(const std::string& name) const {
  for (const Named& nt : tensors)
    if (nt.name == name) return nt.tensor;
  std::string names;
  for (size_t i = 0; i < tensors.size() && i < 8; ++i) names += (i ? ", " : "") + tensors[i].name;
  if (tensors.size() > 8) names += ", ...";
  fail("[safetensors] ", source.empty() ? std::string("file") : source, ": no tensor named ", quoted(name), " (",
       tensors.size(), " tensors", tensors.empty() ? std::string("") : ": " + names, ")");
}

bool File::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const Named& nt) { return nt.name == name; });
}

}  // namespace uoe::safetensors
