// The safetensors header parser and writer (Note [safetensors parsing] in kael/io/safetensors.h),
// without files: every reason a header is refused, and what a valid one parses to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "kael/core/error.h"
#include "kael/core/storage.h"
#include "kael/core/tensor_impl.h"
#include "kael/io/safetensors.h"

namespace {

using kael::io::parse_safetensors_header;

kael::io::SafetensorsHeader parse(const std::string& text, std::uint64_t data_size) {
  return parse_safetensors_header(text, data_size, "load_safetensors", "f.safetensors");
}

// The message of the ValueError parsing `text` raises ("" when it parses).
std::string error_of(const std::string& text, std::uint64_t data_size) {
  try {
    parse(text, data_size);
  } catch (const kael::ValueError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_REFUSED(text, size, fragment)                                                    \
  do {                                                                                          \
    const std::string msg_ = error_of(text, size);                                             \
    EXPECT_NE(msg_.find(fragment), std::string::npos) << "message: " << msg_ << "\nheader: " << (text); \
    EXPECT_NE(msg_.find("load_safetensors: 'f.safetensors': "), std::string::npos) << msg_;     \
  } while (0)

TEST(SafetensorsHeader, ParsesTensorsSortedByOffsetAndMetadataInOrder) {
  const auto h = parse(
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"__metadata__":{"k":"v","a":"\u00e9\n"},)"
      R"( "a" : { "shape" : [ 2 , 1 ] , "data_offsets":[0,8], "dtype":"I32" } }   )",
      16);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[0].dtype->kael, kael::ScalarType::Int32);
  EXPECT_EQ(h.tensors[0].shape, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(h.tensors[1].name, "b");
  EXPECT_EQ(h.tensors[1].begin, 8u);
  ASSERT_TRUE(h.metadata.has_value());
  ASSERT_EQ(h.metadata->size(), 2u);
  EXPECT_EQ((*h.metadata)[0].first, "k");
  EXPECT_EQ((*h.metadata)[1].second, "\xc3\xa9\n");
}

TEST(SafetensorsHeader, EmptyHeaderAndZeroSizedTensors) {
  EXPECT_TRUE(parse("{}", 0).tensors.empty());
  EXPECT_FALSE(parse("{}", 0).metadata.has_value());
  const auto h = parse(R"({"e":{"dtype":"F64","shape":[0,3],"data_offsets":[0,0]},)"
                       R"("s":{"dtype":"BOOL","shape":[],"data_offsets":[0,1]}})",
                       1);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "e");
  EXPECT_EQ(h.tensors[1].shape.size(), 0u);
}

TEST(SafetensorsHeader, SurrogatePairsDecode) {
  const auto h = parse(R"({"\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  EXPECT_EQ(h.tensors[0].name, "\xf0\x9f\x98\x80");
}

TEST(SafetensorsHeader, RefusesInvalidJson) {
  EXPECT_REFUSED("", 0, "must be a JSON object");
  EXPECT_REFUSED("[]", 0, "must be a JSON object");
  EXPECT_REFUSED("{", 0, "invalid JSON");
  EXPECT_REFUSED("{}x", 0, "unexpected characters after the JSON object");
  EXPECT_REFUSED("{} {}", 0, "unexpected characters");
  EXPECT_REFUSED(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},})", 1, "invalid JSON");
  EXPECT_REFUSED(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})", 1, "expected '}'");
  EXPECT_REFUSED("{\"a\x01\":1}", 0, "control character");
  EXPECT_REFUSED(R"({"a\q":1})", 0, "invalid escape");
  EXPECT_REFUSED(R"({"\ud800":1})", 0, "lone high surrogate");
  EXPECT_REFUSED(R"({"\udc00":1})", 0, "lone low surrogate");
  EXPECT_REFUSED(R"({"\u12G4":1})", 0, "invalid hex digit");
  EXPECT_REFUSED("{\"\xff\":1}", 0, "not valid UTF-8");
  EXPECT_REFUSED("{\"\xed\xa0\x80\":1}", 0, "not valid UTF-8");  // an encoded surrogate
  EXPECT_REFUSED("{\"\xc0\xaf\":1}", 0, "not valid UTF-8");      // overlong
  EXPECT_REFUSED(R"({"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}})", 1, "leading zero");
}

TEST(SafetensorsHeader, RefusesBadEntries) {
  EXPECT_REFUSED(R"({"w":[1]})", 0, "tensor 'w': the entry must be an object");
  EXPECT_REFUSED(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", 1, "tensor 'w': missing key 'dtype'");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1, "missing key 'shape'");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1]}})", 1, "missing key 'data_offsets'");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1, "duplicate key 'dtype'");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", 1, "unexpected key 'x'");
  EXPECT_REFUSED(R"({"w":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})", 1, "tensor 'w': unknown dtype 'Q8'");
  EXPECT_REFUSED(R"({"w":{"dtype":8,"shape":[1],"data_offsets":[0,1]}})", 1, "dtype must be a string, found a number");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1, "must not be negative, found -1");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", 1, "must be an integer, found 1.5");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}})", 1, "must be an integer, found 1e0");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}})", 1, "found a string");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1, "exactly 2 integers, found 1");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}})", 1, "exactly 2 integers, found more");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,99999999999999999999]}})", 1,
                 "integer overflow");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[0],"data_offsets":[1,1]}})",
                 1, "duplicate tensor name 'w'");
  EXPECT_REFUSED(R"({"__metadata__":{},"__metadata__":{}})", 0, "duplicate key '__metadata__'");
  EXPECT_REFUSED(R"({"__metadata__":{"a":1}})", 0, "value of key 'a' must be a string");
  EXPECT_REFUSED(R"({"__metadata__":{"a":"x","a":"y"}})", 0, "duplicate key 'a' in '__metadata__'");
  EXPECT_REFUSED(R"({"__metadata__":[]})", 0, "'__metadata__' must be an object");
  std::string deep = R"({"w":{"dtype":"U8","shape":[)";
  for (int i = 0; i < 65; ++i) deep += i ? ",1" : "1";
  EXPECT_REFUSED(deep + R"(],"data_offsets":[0,1]}})", 1, "more than 64 dims");
}

TEST(SafetensorsHeader, RefusesInconsistentOffsets) {
  EXPECT_REFUSED(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, "needs 8 bytes, but data_offsets [0, 4] hold 4");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[1,0]}})", 1, "end before they begin");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[4,5]}})", 4, "reach beyond the data section of 4 bytes");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2, "leave bytes [0, 1)");
  EXPECT_REFUSED(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
                 3, "tensor 'b': data_offsets [1, 3] overlap those of tensor 'a' [0, 2]");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 2, "cover 1 bytes, but the data section holds 2");
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}})", 1, "integer overflow");
  // a zero dim does not excuse an overflowing product (strides would overflow)
  EXPECT_REFUSED(R"({"w":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})", 0, "integer overflow");
  EXPECT_REFUSED(R"({"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,1]}})", 1, "needs");
  EXPECT_REFUSED(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}})", 1, "does not fill whole bytes");
}

TEST(SafetensorsHeader, NamesInMessagesAreEscapedAndShortened) {
  const std::string long_name(500, 'n');
  const std::string msg = error_of("{\"" + long_name + "\":{\"dtype\":\"Q\",\"shape\":[],\"data_offsets\":[0,0]}}", 0);
  EXPECT_NE(msg.find("... (500 bytes)"), std::string::npos) << msg;
  const std::string msg2 = error_of(R"({"a\u0001'b":{"dtype":"Q","shape":[],"data_offsets":[0,0]}})", 0);
  EXPECT_NE(msg2.find(R"(tensor 'a\x01\'b')"), std::string::npos) << msg2;
}

kael::Tensor ones_like_shape(kael::ScalarType dtype, std::vector<std::int64_t> shape) {
  const kael::IntArrayRef sizes(shape.data(), shape.size());
  const std::int64_t n = kael::checked_numel("test", sizes);
  auto storage = kael::Storage::allocate(static_cast<std::size_t>(n * kael::itemsize(dtype)), kael::kCPU);
  return kael::Tensor(kael::TensorImpl::make(std::move(storage), dtype, kael::DimVector(sizes),
                                             kael::contiguous_strides(sizes), 0));
}

TEST(SafetensorsHeader, SerialisesAsTheReferenceWriter) {
  // The reference writer's own test case: {"attn.0": F32 [1, 2, 3]} and the padding to 8 bytes.
  kael::io::NamedTensors ts;
  ts.emplace_back("attn.0", ones_like_shape(kael::ScalarType::Float32, {1, 2, 3}));
  EXPECT_EQ(kael::io::serialize_safetensors_header(ts, nullptr, nullptr),
            R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})");
  ts.clear();
  ts.emplace_back("attn0", ones_like_shape(kael::ScalarType::Float32, {1, 1, 2, 3}));
  EXPECT_EQ(kael::io::serialize_safetensors_header(ts, nullptr, nullptr),
            R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )");
  const kael::io::StringPairs md{{"framework", "pt"}};
  EXPECT_EQ(kael::io::serialize_safetensors_header({}, &md, nullptr),
            R"({"__metadata__":{"framework":"pt"}}     )");
  EXPECT_EQ(kael::io::serialize_safetensors_header({}, nullptr, nullptr), "{}      ");
}

TEST(SafetensorsHeader, WriterOrdersByDtypeThenNameAndEscapesAsSerde) {
  kael::io::NamedTensors ts;
  ts.emplace_back("b", ones_like_shape(kael::ScalarType::Bool, {1}));
  ts.emplace_back("a\"\\\n\x1f/", ones_like_shape(kael::ScalarType::Float64, {}));
  ts.emplace_back("c", ones_like_shape(kael::ScalarType::Int64, {1}));
  std::vector<std::size_t> order;
  const std::string h = kael::io::serialize_safetensors_header(ts, nullptr, &order);
  EXPECT_EQ(order, (std::vector<std::size_t>{2, 1, 0}));
  EXPECT_EQ(h.substr(0, h.find_last_not_of(' ') + 1),
            R"({"c":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
            R"("a\"\\\n\u001f/":{"dtype":"F64","shape":[],"data_offsets":[8,16]},)"
            R"("b":{"dtype":"BOOL","shape":[1],"data_offsets":[16,17]}})");
  // and it parses back
  const auto parsed = parse(h, 17);
  EXPECT_EQ(parsed.tensors[1].name, "a\"\\\n\x1f/");
}

}  // namespace

namespace {

// Deterministic mutations of valid headers (bit flips, truncation, splices of JSON tokens,
// random bytes): each parses or raises ValueError, never anything else (run under ASan + UBSan
// by tools/run_sanitizers.sh).
TEST(SafetensorsHeader, MutatedHeadersOnlyRaiseValueError) {
  const std::string seeds[] = {
      R"({"__metadata__":{"format":"pt","k":"\u00e9\n"},"a.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"I64","shape":[],"data_offsets":[24,32]},"c":{"dtype":"BOOL","shape":[0,4],"data_offsets":[32,32]}})",
      R"({"x":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})",
      "{}",
  };
  const char* tokens[] = {"\"", "{", "}", "[", "]", ",", ":", "-", "0", "01", "1e999", "1.5", "18446744073709551616",
                          "9223372036854775807", "null", "\\", "\\u", "\\ud800", "\\udc00", "\\u0000", "\xff", "\xc0",
                          "\xed\xa0\x80", " ", "\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"__metadata__\""};
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state]() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int parsed = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string h = seeds[static_cast<std::size_t>(i) % std::size(seeds)];
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits && !h.empty(); ++e) {
      const std::size_t at = next() % (h.size() + 1);
      switch (next() % 4) {
        case 0:
          if (at < h.size()) h[at] = static_cast<char>(h[at] ^ (1 << (next() % 8)));
          break;
        case 1: h.resize(at); break;
        case 2: h.replace(at, std::min<std::size_t>(next() % 4, h.size() - at), tokens[next() % std::size(tokens)]); break;
        default: h.insert(at, 1, static_cast<char>(next() & 0xFF)); break;
      }
    }
    const std::uint64_t sizes[] = {0, 8, 24, 32, 33, next()};
    try {
      parse(h, sizes[next() % std::size(sizes)]);
      ++parsed;
    } catch (const kael::ValueError&) {
      ++refused;
    }
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(refused, 10000);
}

}  // namespace

namespace {

std::string temp_path(const char* name) { return testing::TempDir() + "kael_safetensors_" + name; }

kael::Tensor filled(kael::ScalarType dtype, std::vector<std::int64_t> shape, unsigned seed) {
  kael::Tensor t = ones_like_shape(dtype, std::move(shape));
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  const std::size_t n = static_cast<std::size_t>(t.numel() * t.element_size());
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(dtype == kael::ScalarType::Bool ? (i + seed) % 2 : i * 31 + seed);
  return t;
}

std::string read_all(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  std::fclose(f);
  return out;
}

void write_all(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".new";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());  // never truncate a file a mapping may still use
}

TEST(SafetensorsFile, SaveLoadRoundTripInBothModes) {
  kael::io::NamedTensors ts;
  ts.emplace_back("w", filled(kael::ScalarType::Float32, {3, 5}, 1));
  ts.emplace_back("b", filled(kael::ScalarType::Bool, {7}, 2));
  ts.emplace_back("h", filled(kael::ScalarType::BFloat16, {}, 3));
  ts.emplace_back("e", filled(kael::ScalarType::Int64, {0, 2}, 4));
  const kael::io::StringPairs md{{"k", "v"}};
  const std::string path = temp_path("round.safetensors");
  kael::io::save_safetensors(ts, path, &md);
  EXPECT_EQ(kael::io::read_safetensors_metadata(path), md);
  for (bool mmap : {false, true}) {
    const auto loaded = kael::io::load_safetensors(path, mmap);
    ASSERT_EQ(loaded.size(), 4u);
    EXPECT_EQ(loaded[0].first, "b");  // by name
    for (const auto& [name, t] : loaded) {
      const auto it = std::find_if(ts.begin(), ts.end(), [&](const auto& p) { return p.first == name; });
      ASSERT_NE(it, ts.end());
      EXPECT_EQ(t.dtype(), it->second.dtype());
      EXPECT_TRUE(std::equal(t.sizes().begin(), t.sizes().end(), it->second.sizes().begin(), it->second.sizes().end()));
      const std::size_t n = static_cast<std::size_t>(t.numel() * t.element_size());
      EXPECT_EQ(n == 0 || std::memcmp(t.data_ptr(), it->second.data_ptr(), n) == 0, true) << name;
    }
  }
  std::remove(path.c_str());
}

TEST(SafetensorsFile, MutatedFilesOnlyRaiseValueErrorOrFileError) {
  kael::io::NamedTensors ts;
  ts.emplace_back("w", filled(kael::ScalarType::Float32, {3, 5}, 1));
  ts.emplace_back("b", filled(kael::ScalarType::Bool, {7}, 2));
  ts.emplace_back("i", filled(kael::ScalarType::Int16, {2, 2}, 3));
  const std::string path = temp_path("fuzz.safetensors");
  kael::io::save_safetensors(ts, path, nullptr);
  const std::string valid = read_all(path);
  std::uint64_t state = 0x2545F4914F6CDD1Dull;
  auto next = [&state]() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int loaded = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = valid;
    switch (i % 4) {
      case 0:  // bit flips, mostly in the length and the header
        for (int k = 0; k < 1 + static_cast<int>(next() % 4); ++k) {
          const std::size_t at = next() % (next() % 2 ? 8 + 200 : bytes.size());
          bytes[at] = static_cast<char>(bytes[at] ^ (1 << (next() % 8)));
        }
        break;
      case 1: bytes.resize(next() % bytes.size()); break;
      case 2: bytes += std::string(1 + next() % 9, '\x02'); break;
      default:  // a random header length
        for (int k = 0; k < 8; ++k) bytes[static_cast<std::size_t>(k)] = static_cast<char>(next() % 3 ? next() : 0);
        break;
    }
    write_all(path, bytes);
    try {
      const auto out = kael::io::load_safetensors(path, i % 2 == 1);
      std::uint64_t sum = 0;  // touch every byte
      for (const auto& [name, t] : out) {
        const auto* p = static_cast<const unsigned char*>(t.data_ptr());
        for (std::int64_t k = 0; k < t.numel() * t.element_size(); ++k) sum += p[k];
      }
      (void)sum;
      ++loaded;
    } catch (const kael::ValueError&) {
      ++refused;
    } catch (const kael::io::FileError&) {
      ++refused;
    }
  }
  EXPECT_GT(loaded, 20);  // bit flips in the data, padding and unused bits
  EXPECT_GT(refused, 1000);
  std::remove(path.c_str());
}

}  // namespace
