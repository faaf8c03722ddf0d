//===- SemaDataset.cpp - datasets and their prompt templates --------------===//
//
// A dataset's properties, the record type its fields give, and the checks on
// its `template` (lang/README.md §3.6), with errors located inside the
// string.
//
//===----------------------------------------------------------------------===//

#include "PromptTemplate.h"
#include "SemaImpl.h"
#include "rlhf/runtime/PromptTemplate.h"
#include "llvm/ADT/StringExtras.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

void Sema::resolveDataset(const EntityDecl &d) {
  PropMap m;
  std::vector<const EntityDecl *> chain;
  if (!gatherProps(d, kDatasetProps, m, chain) ||
      !checkRequired(d, kDatasetProps, m))
    return;
  Dataset ds;
  ds.name = d.name;
  ds.loc = d.loc;
  if (auto *pp = m.lookup("path"); pp && checkHasValue(*pp))
    if (auto s = evalString(*pp->value, "'path'"))
      ds.path = *s;
  setInt(m, "batch", ds.batch, 1, 1 << 24);
  setInt(m, "max_prompt_len", ds.maxPromptLen, 1, 1 << 20);
  setInt(m, "max_response_len", ds.maxResponseLen, 0, 1 << 20);
  // With a template, 'fields' lists the columns it reads, and the record's
  // 'prompt' is the rendered template; in a dataset of whole sequences
  // ('text' listed, for SFT) the template renders 'text' instead.
  const Property *tp = m.lookup("template");
  if (tp && checkHasValue(*tp))
    ds.promptTemplate = evalString(*tp->value, "'template'");
  const Property *f = m.lookup("fields");
  if (!f || !checkHasValue(*f))
    return;
  if (f->value->kind != Expr::Kind::List || f->value->elems.empty()) {
    error(f->value->loc, "'fields' must be a list of field names, e.g. "
                         "'fields = [prompt, answer];'");
    return;
  }
  static const std::vector<std::string> roles = {
      "prompt", "answer", "chosen", "rejected", "text", "completion", "label"};
  auto typeOf = [&](StringRef field) {
    TensorType t{TensorKind::Tokens, DType::I32, {ds.batch, ds.maxPromptLen}};
    if (field == "answer") {
      t.kind = TensorKind::Answer;
      t.shape = {ds.batch, std::max<int64_t>(ds.maxResponseLen, 1)};
    } else if (field == "label") {
      t = TensorType{TensorKind::Score, DType::F32, {ds.batch}};
    } else if (field != "prompt") {
      t.shape = {ds.batch, ds.maxPromptLen + ds.maxResponseLen};
    }
    return t;
  };
  std::set<std::string> seen;
  for (auto &el : f->value->elems) {
    if (el->kind != Expr::Kind::Name) {
      error(el->loc, "a dataset field is a name such as 'prompt'");
      continue;
    }
    if (el->text == "kl_completion") {
      error(el->loc, "'kl_completion' is not a column: a dataset with "
                     "'completion' makes it from its rows; remove it from "
                     "'fields'");
      continue;
    }
    bool role = llvm::is_contained(roles, el->text);
    if (!role && !tp) {
      error(el->loc, formatv("unknown dataset field '{0}' (fields are "
                             "prompt, answer, chosen, rejected, text, "
                             "completion and label){1}",
                             el->text, didYouMean(el->text, roles)));
      continue;
    }
    if (!seen.insert(el->text).second) {
      error(el->loc, "dataset field '" + el->text + "' is listed twice");
      continue;
    }
    ds.fields.push_back(el->text);
    if (role)
      ds.type.fields.push_back(Field{el->text, typeOf(el->text)});
  }
  if (tp) {
    if (ds.promptTemplate)
      checkPromptTemplate(*tp, ds);
    if (!seen.count("prompt") && !seen.count("text"))
      ds.type.fields.insert(ds.type.fields.begin(),
                            Field{"prompt", typeOf("prompt")});
  }
  if ((seen.count("chosen") || seen.count("rejected")) && !ds.maxResponseLen)
    error(d.loc, "dataset '" + d.name +
                     "' has preference pairs but no "
                     "'max_response_len'; set it to the longest response");
  if (seen.count("completion"))
    checkCompletions(d, ds, *f, tp != nullptr);

  p.datasets[d.name] = ds;
}

// Unpaired completions (KTO's rows: prompt, completion, label) are read after
// their prompt, so a template may render it; `kl_completion` pairs each
// prompt with the next row's completion, the mismatched pairs from which
// KTO estimates its reference point.
void Sema::checkCompletions(const EntityDecl &d, Dataset &ds,
                            const Property &fields, bool templated) {
  // A template renders `prompt`, unless the dataset holds whole texts.
  const bool prompted = llvm::is_contained(ds.fields, "prompt") ||
                        (templated && !llvm::is_contained(ds.fields, "text"));
  if (!prompted) {
    error(fields.value->loc,
          formatv("dataset '{0}' has 'completion' but no 'prompt': a "
                  "completion continues its row's prompt; list 'prompt' "
                  "too, or read whole sequences as 'text'",
                  ds.name));
    return;
  }
  if (!ds.maxResponseLen) {
    error(d.loc, "dataset '" + d.name +
                     "' has completions but no 'max_response_len'; set it "
                     "to the longest completion");
    return;
  }
  if (ds.batch == 1)
    warning(d.loc, "dataset '" + d.name +
                       "' reads 1 row per step, so 'kl_completion' pairs "
                       "each prompt with its own completion, not another "
                       "row's; KTO's reference point needs 'batch' of 2 or "
                       "more");
  TensorType t{TensorKind::Tokens,
               DType::I32,
               {ds.batch, ds.maxPromptLen + ds.maxResponseLen}};
  ds.type.fields.push_back(Field{"kl_completion", t});
}

void Sema::checkPromptTemplate(const Property &tp, const Dataset &ds) {
  const Expr &e = *tp.value;
  const std::string &text = *ds.promptTemplate;
  // The location of byte `offset` of the template's value.
  auto at = [&](size_t offset) -> mlir::Location {
    auto flc = llvm::dyn_cast<mlir::FileLineColLoc>(e.loc);
    if (!flc)
      return e.loc;
    return mlir::FileLineColLoc::get(flc.getFilename(), flc.getLine(),
                                     flc.getColumn() + 1 +
                                         sourceColumns(text, offset));
  };
  for (StringRef whole : {"chosen", "rejected"})
    if (llvm::is_contained(ds.fields, whole)) {
      error(e.loc, formatv("a template writes prompts or texts, but dataset "
                           "'{0}' holds preference pairs ('{1}'); remove "
                           "'template'",
                           ds.name, whole));
      return;
    }
  if (text.empty()) {
    error(e.loc, "'template' is empty; write the prompt text with {column} "
                 "placeholders, e.g. \"Question: {question}\\nAnswer:\"");
    return;
  }
  std::vector<rlhf::TemplatePiece> pieces;
  rlhf::TemplateSyntax bad = rlhf::parsePromptTemplate(text, pieces);
  switch (bad.kind) {
  case rlhf::TemplateSyntax::Unclosed:
    error(at(bad.offset), "unclosed '{' in the template; end the placeholder "
                          "with '}', or write '{{' for a literal '{'");
    return;
  case rlhf::TemplateSyntax::Stray:
    error(at(bad.offset),
          "stray '}' in the template; write '}}' for a literal '}'");
    return;
  case rlhf::TemplateSyntax::Empty:
    error(at(bad.offset), "empty placeholder '{}' in the template; name a "
                          "field between the braces, or write '{{' for a "
                          "literal '{'");
    return;
  case rlhf::TemplateSyntax::Ok:
    break;
  }
  std::set<std::string> used;
  bool known = true;
  for (const rlhf::TemplatePiece &h : pieces) {
    if (!h.column)
      continue;
    used.insert(h.text);
    if (llvm::is_contained(ds.fields, h.text))
      continue;
    error(at(h.offset + 1),
          formatv("unknown field '{0}' in the template (the dataset's "
                  "fields are {1}); add it to 'fields'{2}",
                  h.text, llvm::join(ds.fields, ", "),
                  didYouMean(h.text, ds.fields)));
    known = false;
  }
  for (const std::string &c : ds.fields)
    if (known && !used.count(c) && c != "answer" && c != "text" &&
        c != "completion" && c != "label")
      warning(e.loc, formatv("field '{0}' of dataset '{1}' is not used by its "
                             "template; remove it from 'fields'",
                             c, ds.name));
}
