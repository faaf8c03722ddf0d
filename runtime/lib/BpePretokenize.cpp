//===- BpePretokenize.cpp - text to words for BpeTokenizer ----------------===//
//
// The `tokenizers` library runs its regexes with Oniguruma (Ruby syntax);
// here PCRE2 runs them, with UTF and Unicode properties on. The two agree on
// the patterns of GPT-2, LLaMA-3 and Qwen2 once `\s` means what it means to
// Oniguruma (see ruby()).
//
//===----------------------------------------------------------------------===//

#include "BpePretokenize.h"

#include "rlhf/runtime/Error.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <nlohmann/json.hpp>
#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include <algorithm>

using namespace rlhf;
using namespace rlhf::bpe;
using nlohmann::json;

size_t bpe::invalidUtf8At(const std::string &s) {
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    if ((c >= 0x80 && c < 0xC2) || c > 0xF4 || i + len > n)
      return i;
    for (size_t k = 1; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80)
        return i;
    // The second byte's range rules out overlongs, surrogates and >U+10FFFF.
    unsigned c1 = len > 1 ? p[i + 1] : 0x80;
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) ||
        (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
      return i;
    i += len;
  }
  return std::string::npos;
}

char32_t bpe::nextChar(const std::string &s, size_t &i) {
  auto b = [&](size_t k) { return char32_t(static_cast<unsigned char>(s[k])); };
  char32_t c = b(i);
  if (c < 0x80) {
    i += 1;
    return c;
  }
  if (c < 0xE0) {
    i += 2;
    return (c & 0x1F) << 6 | (b(i - 1) & 0x3F);
  }
  if (c < 0xF0) {
    i += 3;
    return (c & 0x0F) << 12 | (b(i - 2) & 0x3F) << 6 | (b(i - 1) & 0x3F);
  }
  i += 4;
  return (c & 0x07) << 18 | (b(i - 3) & 0x3F) << 12 | (b(i - 2) & 0x3F) << 6 |
         (b(i - 1) & 0x3F);
}

static std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xF0 | (c >> 18));
    s += char(0x80 | ((c >> 12) & 0x3F));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

bool bpe::isSpace(char32_t c) {
  return u_hasBinaryProperty(UChar32(c), UCHAR_WHITE_SPACE);
}

bool bpe::isWordChar(char32_t c) {
  switch (u_charType(UChar32(c))) {
  case U_NON_SPACING_MARK:
  case U_ENCLOSING_MARK:
  case U_COMBINING_SPACING_MARK:
  case U_DECIMAL_DIGIT_NUMBER:
  case U_CONNECTOR_PUNCTUATION:
    return true;
  default:
    return u_hasBinaryProperty(UChar32(c), UCHAR_ALPHABETIC) ||
           u_hasBinaryProperty(UChar32(c), UCHAR_JOIN_CONTROL);
  }
}

std::string bpe::nfc(const std::string &s) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2 *n = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err))
    throw Error(std::string("cannot load icu's nfc data: ") + u_errorName(err));
  icu::StringPiece in(s.data(), int32_t(s.size()));
  if (n->isNormalizedUTF8(in, err) && U_SUCCESS(err))
    return s;
  err = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out);
  n->normalizeUTF8(0, in, sink, nullptr, err);
  if (U_FAILURE(err))
    throw Error(std::string("nfc normalization failed: ") + u_errorName(err));
  return out;
}

const std::array<std::string, 256> &bpe::byteChars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    // Printable Latin-1 bytes stand for themselves; the rest, in byte
    // order, take the characters from U+0100 on.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      t[size_t(b)] = utf8(printable ? char32_t(b) : next++);
    }
    return t;
  }();
  return table;
}

/// Oniguruma's meaning for the escapes where PCRE2's differs: `\s` is
/// White_Space (PCRE2's also takes U+180E) and `\h` a hex digit (PCRE2's is
/// a horizontal space). `\S` and `\H` inside a class, and `\w`, are left
/// as PCRE2 reads them: the patterns of GPT-2, LLaMA-3 and Qwen2 use none.
static std::string ruby(const std::string &p) {
  static const std::string space = "\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}",
                           hex = "0-9a-fA-F";
  std::string out;
  bool inClass = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[++i];
      if (e == 's' || e == 'h')
        out += inClass ? (e == 's' ? space : hex)
                       : "[" + (e == 's' ? space : hex) + "]";
      else if ((e == 'S' || e == 'H') && !inClass)
        out += "[^" + (e == 'S' ? space : hex) + "]";
      else
        out += {c, e};
      continue;
    }
    if (c == '[' && inClass && i + 1 < p.size() && p[i + 1] == ':') {
      size_t end = p.find(":]", i + 2); // a POSIX class such as [:alpha:]
      if (end != std::string::npos) {
        out += p.substr(i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (c == '[')
      inClass = true;
    else if (c == ']')
      inClass = false;
    out += c;
  }
  return out;
}

Regex::Regex(const std::string &pattern, bool literal,
             const std::string &where) {
  std::string p = literal ? pattern : ruby(pattern);
  // Ruby's ^ and $ match at line breaks.
  uint32_t options = literal ? PCRE2_LITERAL | PCRE2_UTF
                             : PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
  int err = 0;
  PCRE2_SIZE at = 0;
  code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                       options, &err, &at, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(where + ": cannot compile the regex \"" + pattern +
                "\" at offset " + std::to_string(at) + ": " +
                reinterpret_cast<const char *>(msg));
  }
  jit = pcre2_jit_compile(static_cast<pcre2_code *>(code),
                          PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code *>(code)); }

std::vector<std::pair<size_t, size_t>>
Regex::findAll(const std::string &s) const {
  auto *re = static_cast<pcre2_code *>(code);
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data *)> md(
      pcre2_match_data_create_from_pattern(re, nullptr), pcre2_match_data_free);
  std::vector<std::pair<size_t, size_t>> found;
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0, lastEnd = std::string::npos;
  while (pos <= s.size()) {
    int rc = pcre2_match(re, subject, s.size(), pos, PCRE2_NO_UTF_CHECK,
                         md.get(), nullptr);
    // The JIT's stack is small; the interpreter's heap grows.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(re, subject, s.size(), pos,
                       PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(std::string("pre-tokenizer regex failed: ") +
                  reinterpret_cast<const char *>(msg));
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md.get());
    size_t b = ov[0], e = ov[1];
    // As Oniguruma's find_iter: an empty match where the last one ended
    // moves the search on one character instead.
    if (b == e && e == lastEnd) {
      if (pos == s.size())
        break;
      nextChar(s, pos);
      continue;
    }
    found.emplace_back(b, e);
    pos = lastEnd = e;
  }
  return found;
}

namespace {
enum class Behavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous
};
struct Segment {
  size_t b, e;
  bool flag; ///< a match before the behaviour; to remove after it
};
} // namespace

struct PreTokenizer::Step {
  bool byteLevel = false;
  bool addPrefixSpace = false;
  std::shared_ptr<const Regex> regex; ///< none: ByteLevel without its regex
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
};

/// normalizer.rs's NormalizedString::split: the pieces of `s` between and at
/// the matches, grouped by `behavior`.
static void split(const std::string &s, const Regex &re, Behavior behavior,
                  bool invert, std::vector<std::string> &out) {
  std::vector<Segment> segs;
  size_t prev = 0;
  for (auto [b, e] : re.findAll(s)) {
    if (prev != b)
      segs.push_back({prev, b, invert});
    segs.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != s.size())
    segs.push_back({prev, s.size(), invert});

  std::vector<Segment> pieces;
  bool previous = false;
  switch (behavior) {
  case Behavior::Removed:
    pieces = segs;
    break;
  case Behavior::Isolated:
    for (Segment g : segs)
      pieces.push_back({g.b, g.e, false});
    break;
  case Behavior::Contiguous:
    for (Segment g : segs) {
      if (g.flag == previous && !pieces.empty())
        pieces.back().e = g.e;
      else
        pieces.push_back({g.b, g.e, false});
      previous = g.flag;
    }
    break;
  case Behavior::MergedWithPrevious:
    for (Segment g : segs) {
      if (g.flag && !previous && !pieces.empty())
        pieces.back().e = g.e;
      else
        pieces.push_back({g.b, g.e, false});
      previous = g.flag;
    }
    break;
  case Behavior::MergedWithNext:
    for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
      if (it->flag && !previous && !pieces.empty())
        pieces.back().b = it->b;
      else
        pieces.push_back({it->b, it->e, false});
      previous = it->flag;
    }
    std::reverse(pieces.begin(), pieces.end());
    break;
  }
  for (Segment g : pieces)
    if (!g.flag && g.e > g.b)
      out.push_back(s.substr(g.b, g.e - g.b));
}

PreTokenizer::PreTokenizer(const json &j, const std::string &path) {
  if (!j.is_null())
    parse(j, path, steps);
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer &&) noexcept = default;

void PreTokenizer::parse(const json &j, const std::string &path,
                         std::vector<Step> &steps) {
  auto fail = [&](const std::string &why) -> Error {
    return Error("tokenizer file '" + path + "': " + why);
  };
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw fail("the pre-tokenizer must be an object with a \"type\"");
  std::string type = j["type"];
  Step step;
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      throw fail("the Sequence pre-tokenizer lacks its \"pretokenizers\" list");
    for (const json &p : j["pretokenizers"])
      parse(p, path, steps);
    return;
  }
  if (type == "ByteLevel") {
    // GPT-2's own pattern, as the library hard-codes it.
    static const auto gpt2 = std::make_shared<const Regex>(
        R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+)"
        R"(|\s+(?!\S)|\s+)",
        false, "the ByteLevel pre-tokenizer");
    step.byteLevel = true;
    step.addPrefixSpace = j.value("add_prefix_space", true);
    if (j.value("use_regex", true))
      step.regex = gpt2;
    steps.push_back(std::move(step));
    return;
  }
  if (type != "Split")
    throw fail("unsupported pre-tokenizer type \"" + type +
               "\" (supported: Sequence, Split, ByteLevel)");
  const json *pattern = j.contains("pattern") ? &j["pattern"] : nullptr;
  bool literal = pattern && pattern->contains("String");
  const char *key = literal ? "String" : "Regex";
  if (!pattern || !pattern->contains(key) || !(*pattern)[key].is_string())
    throw fail("the Split pre-tokenizer's \"pattern\" must be "
               "{\"Regex\": ...} or {\"String\": ...}");
  step.regex =
      std::make_shared<const Regex>((*pattern)[key].get<std::string>(), literal,
                                    "tokenizer file '" + path + "'");
  static const std::pair<const char *, Behavior> behaviors[] = {
      {"Removed", Behavior::Removed},
      {"Isolated", Behavior::Isolated},
      {"MergedWithPrevious", Behavior::MergedWithPrevious},
      {"MergedWithNext", Behavior::MergedWithNext},
      {"Contiguous", Behavior::Contiguous}};
  std::string behavior = j.value("behavior", "");
  auto it = std::find_if(std::begin(behaviors), std::end(behaviors),
                         [&](const auto &b) { return behavior == b.first; });
  if (it == std::end(behaviors))
    throw fail("unsupported Split behavior \"" + behavior + "\"");
  step.behavior = it->second;
  step.invert = j.value("invert", false);
  steps.push_back(std::move(step));
}

void PreTokenizer::run(const std::string &s,
                       std::vector<std::string> &out) const {
  std::vector<std::string> pieces, next;
  if (!s.empty())
    pieces.push_back(s);
  for (const Step &step : steps) {
    next.clear();
    for (std::string &p : pieces) {
      if (!step.byteLevel) {
        split(p, *step.regex, step.behavior, step.invert, next);
        continue;
      }
      if (step.addPrefixSpace && p[0] != ' ')
        p.insert(0, 1, ' ');
      size_t first = next.size();
      if (step.regex)
        split(p, *step.regex, Behavior::Isolated, false, next);
      else
        next.push_back(std::move(p));
      for (size_t i = first; i < next.size(); ++i) {
        std::string mapped;
        for (unsigned char b : next[i])
          mapped += byteChars()[b];
        next[i] = std::move(mapped);
      }
    }
    pieces.swap(next);
  }
  for (std::string &p : pieces)
    out.push_back(std::move(p));
}

bool PreTokenizer::byteLevel() const {
  return std::any_of(steps.begin(), steps.end(),
                     [](const Step &s) { return s.byteLevel; });
}
