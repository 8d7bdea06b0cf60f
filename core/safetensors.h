// safetensors: reading and writing the Hugging Face tensor file format, with full validation.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON header
// {"__metadata__": {"format": "pt", ...}, "<name>": {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]}, ...} padded with spaces to a multiple of 8, then the byte
// buffer (offsets relative to its start; tensors contiguous row-major little-endian).
// dtypes: F32 F64 BF16 F16 I32 I64 BOOL.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/deferred_tensor.h"
#include "core/tensor.h"

namespace uoe::safetensors {

struct Named {
  std::string name;
  Tensor tensor;
};

// The file's bytes. Tensors may be on any device and non-contiguous (each is written as its
// contiguous CPU copy). Names must be unique, non-empty and not "__metadata__". The header
// lists tensors in the given order; the buffer holds them sorted by element size (largest
// first, stable) so every tensor is aligned to its element size, as the reference writer does.
// "format": "pt" is always in the metadata (a caller's own "format" value wins).
std::string serialize(const std::vector<Named>& tensors, const std::map<std::string, std::string>& metadata = {});
// The same bytes written with write_file_atomic, streamed: one tensor at a time is copied to the CPU (made
// contiguous), and the file is never held in memory whole.
void save(const std::string& path, const std::vector<Named>& tensors,
          const std::map<std::string, std::string>& metadata = {});
// save() of deferred tensors: the header comes from their declared dtypes and shapes; each is produced when its
// turn in the buffer comes (and must match its declaration), so one is held at a time.
void save(const std::string& path, const DeferredTensors& tensors,
          const std::map<std::string, std::string>& metadata = {});
// What a rank that does not write does meanwhile: produces every tensor in the order save() does, dropping each
// (producers that gather across ranks are then called in the same order on every rank).
void produce_in_save_order(const DeferredTensors& tensors);

struct File {
  std::vector<Named> tensors;  // CPU, contiguous, in header order
  std::map<std::string, std::string> metadata;
  std::string source;          // the path (or source name) it was read from, for error messages
  // The tensor called `name`; the error lists a few of the available names.
  const Tensor& get(const std::string& name) const;
  bool contains(const std::string& name) const;
};

// Reads and validates a file: header length against the file size, the header JSON, dtype
// strings, shapes (non-negative, numel * itemsize == end - begin), offsets within the buffer,
// tensors covering the buffer exactly without overlap or gap, unique names, BOOL bytes 0 or 1.
// Every error names the file and the tensor or field. The tensors are views of the file mapped copy-on-write:
// a page is read when first touched, so a reader that keeps a few rows of a tensor (a data-parallel rank's
// shard) reads only those, and ranks on one node share the page cache. Where the file cannot be mapped, the
// tensors are read into memory. The file must not be truncated or rewritten in place while its tensors live (a
// page read then raises SIGBUS); uoe replaces files by rename, which is safe, and copies what it loads at once.
File load(const std::string& path);
// The same checks on bytes held in memory; `source` names them in errors.
File deserialize(const std::string& bytes, const std::string& source);

}  // namespace uoe::safetensors
