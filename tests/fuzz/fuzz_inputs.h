// What each fuzz target does with one input, shared by the libFuzzer targets
// (tests/fuzz/*_fuzzer.cc) and the regression test that replays every input
// that once crashed (tests/fuzz_regression_test.cc, tests/fuzz/regressions/).
//
// An input passes when the readers accept it or reject it with
// std::runtime_error (the command turns that into one line); anything else
// (a crash, a sanitizer report, another exception, a hang) is a bug.
#ifndef DLPROF_TESTS_FUZZ_FUZZ_INPUTS_H_
#define DLPROF_TESTS_FUZZ_FUZZ_INPUTS_H_

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>
#include <zlib.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlprof/format.h>

#include "backends/eh_frame.h"

#include "readers/dlprof_reader.h"
#include "readers/gperftools_reader.h"
#include "readers/pprof_reader.h"
#include "readers/profile.h"
#include "readers/python_merge.h"
#include "readers/symbolizer.h"
#include "reports/analysis.h"
#include "reports/report_writer.h"

namespace dlprof::fuzz {

// What the symbolizer gives a location it knows nothing about, without
// opening the (fuzzed, so arbitrary) module paths on this machine.
inline void NameLocations(Profile* profile) {
  for (Location& loc : profile->locations) {
    if (loc.pseudo || !loc.frames.empty()) continue;
    char buf[40];
    std::snprintf(buf, sizeof(buf), "+0x%" PRIx64, loc.module_offset);
    loc.frames.push_back(Frame{loc.module + buf, "", 0});
  }
}

// Whether to render with every writer (replaying a file) or with one picked
// by the input (fuzzing: rendering all of them would cost 3-4 times more
// per input, and every writer still meets every kind of input).
enum class Writers { kAll, kOnePerInput };

// What `dlprof report` does after reading: the analysis and the writers,
// rendered to memory. `seed` picks the writer for kOnePerInput.
inline void AnalyzeAndRender(Profile* profile, Writers writers, size_t seed) {
  NameLocations(profile);
  MergePythonStacks(profile);  // as SymbolizeProfile ends
  Analysis analysis = Analyze(*profile);
  std::vector<std::unique_ptr<ReportWriter>> all = AllReportWriters();
  for (size_t i = 0; i < all.size(); ++i) {
    if (writers == Writers::kAll || i == seed % all.size()) all[i]->Render(*profile, analysis);
  }
}

// Cheap and stable: the same input always picks the same writer.
inline size_t PickOf(const std::string& bytes) {
  size_t h = bytes.size();
  for (size_t i = 0; i < bytes.size(); i += 61) h = h * 31 + static_cast<uint8_t>(bytes[i]);
  return h;
}

// Rewrites the CRC of every chunk that fits, so that mutations reach the
// chunk decoders instead of dying at the checksum.
inline std::string WithChunkCrcsFixed(std::string data) {
  size_t off = DLPROF_FILE_HEADER_SIZE;
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(data[at + i])} << (8 * i);
    return v;
  };
  while (data.size() >= off + DLPROF_CHUNK_HEADER_SIZE) {
    uint32_t len = u32(off + 8);
    if (len > data.size() - off - DLPROF_CHUNK_HEADER_SIZE) break;
    uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(data.data() + off + DLPROF_CHUNK_HEADER_SIZE), len));
    for (int i = 0; i < 4; ++i) data[off + 12 + i] = static_cast<char>(crc >> (8 * i));
    off += DLPROF_CHUNK_HEADER_SIZE + len;
  }
  return data;
}

// .dlprof: the bytes as they are (magic, resync after damage), then with
// every chunk's checksum made right (the chunk decoders).
inline void Dlprof(const std::string& bytes, Writers writers = Writers::kAll) {
  size_t pick = PickOf(bytes);
  for (const std::string& data : {bytes, WithChunkCrcsFixed(bytes)}) {
    Profile profile;
    std::string error;
    if (ReadDlprofBuffer(data, "fuzz.dlprof", &profile, &error)) {
      AnalyzeAndRender(&profile, writers, pick++);
    }
  }
}

inline void Gperftools(const std::string& bytes, Writers writers = Writers::kAll) {
  Profile profile;
  try {
    ReadGperftoolsBuffer(bytes, "fuzz.prof", &profile);
  } catch (const std::runtime_error&) {
    return;  // not a gperftools profile: said in one line
  }
  AnalyzeAndRender(&profile, writers, PickOf(bytes));
}

inline std::string Gzip(const std::string& raw) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, raw.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline void PprofBytes(const std::string& bytes, Writers writers, size_t pick) {
  Profile profile;
  ReadPprofBuffer(bytes, "fuzz.pb.gz", &profile);  // never throws on content
  AnalyzeAndRender(&profile, writers, pick);
}

// pprof: the protobuf as it is, then gzipped (as dlprof and Go write it);
// the two decode alike, so only the first is analysed and rendered.
inline void Pprof(const std::string& bytes, Writers writers = Writers::kAll) {
  PprofBytes(bytes, writers, PickOf(bytes));
  Profile profile;
  ReadPprofBuffer(Gzip(bytes), "fuzz.pb.gz", &profile);
}

// pprof, the input taken as a (damaged) gzip stream whatever its first bytes.
inline void PprofGzip(const std::string& bytes, Writers writers = Writers::kAll) {
  std::string data = bytes;
  if (data.size() >= 2) data[0] = '\x1f', data[1] = '\x8b';
  PprofBytes(data, writers, PickOf(bytes));
}

// Module offsets worth looking up in an ELF file: the start, middle and last
// byte of each loadable segment, and each function symbol's file offset.
inline std::vector<uint64_t> InterestingOffsets(const std::string& path) {
  std::vector<uint64_t> out;
  elf_version(EV_CURRENT);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  if (Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr)) {
    size_t n = 0;
    std::vector<GElf_Phdr> loads;
    if (elf_getphdrnum(elf, &n) == 0) {
      for (size_t i = 0; i < n && i < 64; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
        loads.push_back(ph);
        out.push_back(ph.p_offset);
        out.push_back(ph.p_offset + ph.p_filesz / 2);
        if (ph.p_filesz > 0) out.push_back(ph.p_offset + ph.p_filesz - 1);
      }
    }
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf, scn)) != nullptr && out.size() < 256) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
          sh.sh_entsize == 0) {
        continue;
      }
      Elf_Data* data = elf_getdata(scn, nullptr);
      size_t count = data != nullptr ? sh.sh_size / sh.sh_entsize : 0;
      for (size_t i = 1; i < count && out.size() < 256; ++i) {
        GElf_Sym sym;
        if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr ||
            GELF_ST_TYPE(sym.st_info) != STT_FUNC) {
          continue;
        }
        for (const GElf_Phdr& ph : loads) {
          if (sym.st_value >= ph.p_vaddr && sym.st_value < ph.p_vaddr + ph.p_filesz) {
            out.push_back(sym.st_value - ph.p_vaddr + ph.p_offset);
          }
        }
      }
    }
    elf_end(elf);
  }
  close(fd);
  return out;
}

// The symbolizer's ELF input: the bytes as a module file, read for its
// build-id and symbolized at the offsets above (each also as a return
// address), with and without the build-id the file itself declares.
inline void Elf(const std::string& bytes) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/dlprof-fuzz-elf-XXXXXX";
  int fd = mkstemp(path.data());
  if (fd < 0) std::abort();
  if (write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) std::abort();
  close(fd);
  std::string build_id = ReadElfBuildId(path);
  std::vector<uint64_t> offsets = InterestingOffsets(path);
  for (const std::string& id : {build_id, std::string("00112233")}) {
    std::vector<Location> locs;
    std::vector<bool> is_return;
    for (uint64_t off : offsets) {
      for (bool ret : {false, true}) {
        Location loc;
        loc.module = path;
        loc.build_id = id;
        loc.module_offset = off;
        loc.address = off + 0x400000;
        locs.push_back(loc);
        is_return.push_back(ret);
      }
    }
    // A debug-info path with nothing in it: only the module itself is read.
    Symbolizer symbolizer("/nonexistent-dlprof-debug");
    symbolizer.Symbolize(&locs, is_return);
  }
  unlink(path.c_str());
}

// The cfi unwinder's decoder (backends/eh_frame.h) on bytes a loaded object
// may hold: the first byte picks how the rest is read, as a .eh_frame
// section walked entry by entry (an object without .eh_frame_hdr: even) or
// as a .eh_frame_hdr with its search table and the section after it (odd).
// Every read must stay inside the bytes, every loop end.
inline void EhFrame(const std::string& bytes) {
  if (bytes.empty()) return;
  constexpr uintptr_t kAt = 0x10000;  // where the bytes "are loaded"
  EhFrameSource src;
  src.readable_lo = kAt;
  src.readable_hi = kAt + bytes.size() - 1;
  src.copy = reinterpret_cast<const unsigned char*>(bytes.data()) + 1;
  src.base = 0;
  if (bytes[0] & 1) {
    src.eh_frame_hdr = kAt;
  } else {
    src.eh_frame = kAt;
    src.eh_frame_size = bytes.size() - 1;
  }
  CfiRowVector rows;
  std::string error;
  long skipped = 0;
  DecodeEhFrame(src, &rows, &error, &skipped);
}

}  // namespace dlprof::fuzz

#endif  // DLPROF_TESTS_FUZZ_FUZZ_INPUTS_H_
