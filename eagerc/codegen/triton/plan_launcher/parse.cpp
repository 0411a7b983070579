// Reads a launch plan's text (launch_plan.py writes it) into the launcher's structures,
// checking every index against the plan's tables so a run never reads out of bounds.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "plan.h"

namespace eagerc_launcher {

[[noreturn]] void bad_plan(const std::string& what) {
  throw std::runtime_error("eagerc: unreadable launch plan (" + what + ")");
}

int32_t dtype_of(const std::string& name) {
#define EAGERC_MATCH_DTYPE(n) if (name == #n) return aoti_torch_dtype_##n();
  EAGERC_DTYPES(EAGERC_MATCH_DTYPE)
#undef EAGERC_MATCH_DTYPE
  bad_plan("dtype " + name);
}

int32_t device_type_of(const std::string& name) {
  if (name == "cpu") return aoti_torch_device_type_cpu();
  if (name == "cuda") return aoti_torch_device_type_cuda();
  if (name == "privateuse1") return aoti_torch_device_type_privateuse1();
  bad_plan("device type " + name);
}

int64_t checked(int64_t value, int64_t limit, const char* what) {
  if (value < 0 || value >= limit) bad_plan(std::string(what) + " out of range");
  return value;
}

Expr parse_expr(const std::string& text, const Plan& plan) {
  static const struct { const char* name; Code code; } kOps[] = {
      {"+i", Code::AddI}, {"-i", Code::SubI}, {"*i", Code::MulI}, {"/i", Code::DivI}, {"%i", Code::ModI},
      {"+d", Code::AddD}, {"-d", Code::SubD}, {"*d", Code::MulD}, {"/d", Code::DivD}, {"fd", Code::FloorDiv},
      {"pm", Code::PyMod}, {"maxi", Code::MaxI}, {"mini", Code::MinI}, {"maxd", Code::MaxD},
      {"mind", Code::MinD}, {"==i", Code::EqI}, {"!=i", Code::NeI}, {"<i", Code::LtI}, {"<=i", Code::LeI},
      {">i", Code::GtI}, {">=i", Code::GeI}, {"==d", Code::EqD}, {"!=d", Code::NeD}, {"<d", Code::LtD},
      {"<=d", Code::LeD}, {">d", Code::GtD}, {">=d", Code::GeD}, {"&&", Code::And}, {"||", Code::Or},
      {"!", Code::Not}, {"negi", Code::NegI}, {"negd", Code::NegD}, {"i2d", Code::IntToDouble},
      {"d2i", Code::DoubleToInt}, {"d2b", Code::DoubleToBool}};
  Expr expr;
  int depth = 0;
  std::stringstream ops(text);
  std::string op;
  while (std::getline(ops, op, ',')) {
    Op o{};
    const size_t colon = op.find(':');
    const std::string head = op.substr(0, colon), tail = colon == std::string::npos ? "" : op.substr(colon + 1);
    if (colon != std::string::npos) {
      ++depth;
      if (head == "ci") {
        o.code = Code::ConstInt, o.a = std::strtoll(tail.c_str(), nullptr, 10);
      } else if (head == "cd") {
        o.code = Code::ConstDouble, o.d = std::strtod(tail.c_str(), nullptr);
      } else if (head == "r") {
        o.code = Code::Int, o.a = checked(std::stoll(tail), plan.ints, "register");
      } else if (head == "f") {
        o.code = Code::Double, o.a = checked(std::stoll(tail), plan.doubles, "register");
      } else if (head == "I" || head == "F") {
        o.code = head == "I" ? Code::GuardInt : Code::GuardDouble, o.a = checked(std::stoll(tail), 1 << 20, "slot");
      } else if (head == "z" || head == "t") {
        const size_t second = tail.find(':');
        if (second == std::string::npos) bad_plan(op);
        o.code = head == "z" ? Code::Size : Code::Stride;
        o.a = checked(std::stoll(tail.substr(0, second)), plan.slots, "slot");
        o.b = checked(std::stoll(tail.substr(second + 1)), 64, "dimension");
      } else {
        bad_plan(op);
      }
    } else {
      bool found = false;
      for (const auto& known : kOps) {
        if (op == known.name) o.code = known.code, found = true;
      }
      if (!found) bad_plan(op);
      const bool unary = o.code >= Code::Not;
      depth -= unary ? 0 : 1;
      if (depth < 1) bad_plan("stack underflow in " + text);
    }
    if (depth > kMaxStack) bad_plan("expression too deep");
    expr.push_back(o);
  }
  if (depth != 1) bad_plan("expression " + text);
  return expr;
}

Plan* parse_plan(const char* text) {
  auto* plan = new Plan();
  std::stringstream lines(text);
  std::string line, word;
  std::getline(lines, line);
  if (line != "eagerc-launch-plan 1") bad_plan("version: " + line);
  while (std::getline(lines, line)) {
    std::stringstream words(line);
    std::vector<std::string> w;
    while (words >> word) w.push_back(word);
    if (w.empty()) continue;
    auto num = [&](size_t i) {
      if (i >= w.size()) bad_plan("short line: " + line);
      return std::stoll(w[i]);
    };
    auto expr_at = [&](size_t i) {
      if (i >= w.size()) bad_plan("short line: " + line);
      return parse_expr(w[i], *plan);
    };
    const std::string& k = w[0];
    if (k == "inputs") plan->inputs = num(1);
    else if (k == "slots") plan->slots = num(1);
    else if (k == "ints") plan->ints = num(1);
    else if (k == "doubles") plan->doubles = num(1);
    else if (k == "kernel") {
      auto* kernel = new Kernel();
      kernel->cubin = num(2), kernel->shared = num(3), kernel->name = w.at(4);
      if (num(1) != static_cast<int64_t>(plan->kernels.size())) bad_plan(line);
      plan->kernels.push_back(kernel);
    } else if (k == "check") {
      plan->checks.push_back(expr_at(1));
    } else {
      Step s;
      if (k == "item_i" || k == "item_d") {
        s.kind = k == "item_i" ? Kind::ItemI : Kind::ItemD;
        s.a = checked(num(1), k == "item_i" ? plan->ints : plan->doubles, "register");
        s.b = checked(num(2), plan->slots, "slot");
      } else if (k == "seti" || k == "setd") {
        s.kind = k == "seti" ? Kind::SetI : Kind::SetD;
        s.a = checked(num(1), k == "seti" ? plan->ints : plan->doubles, "register");
        s.exprs.push_back(expr_at(2));
      } else if (k == "device" || k == "stream") {
        s.kind = k == "device" ? Kind::Device : Kind::Stream, s.a = num(1);
      } else if (k == "alloc") {
        s.kind = Kind::Alloc, s.a = checked(num(1), plan->slots, "slot"), s.b = dtype_of(w.at(2));
        s.device_type = device_type_of(w.at(3)), s.c = num(4);
        const int64_t ndim = checked(num(5), kMaxRank + 1, "rank");
        for (int64_t i = 0; i < 2 * ndim; ++i) s.exprs.push_back(expr_at(6 + i));
      } else if (k == "view") {
        s.kind = Kind::View, s.a = checked(num(1), plan->slots, "slot"), s.b = checked(num(2), plan->slots, "slot");
        const int64_t ndim = checked(num(3), kMaxRank + 1, "rank");
        for (int64_t i = 0; i < 2 * ndim + 1; ++i) s.exprs.push_back(expr_at(4 + i));
      } else if (k == "move") {
        s.kind = Kind::Move, s.a = checked(num(1), plan->slots, "slot"), s.b = checked(num(2), plan->slots, "slot");
      } else if (k == "reset") {
        s.kind = Kind::Reset, s.a = checked(num(1), plan->slots, "slot");
      } else if (k == "out") {
        s.kind = Kind::Out, s.a = num(1), s.b = checked(num(2), plan->slots, "slot");
      } else if (k == "extern") {
        s.kind = Kind::Extern;
        const std::string& name = w.at(1);
        const char* kinds;
        if (name == "aoti_torch_cuda_mm_out") s.a = static_cast<int64_t>(Extern::MmOut), kinds = "hhh";
        else if (name == "aoti_torch_cuda_bmm_out") s.a = static_cast<int64_t>(Extern::BmmOut), kinds = "hhh";
        else if (name == "aoti_torch_cuda_addmm_out") s.a = static_cast<int64_t>(Extern::AddmmOut), kinds = "hhhhdd";
        else if (name == "aoti_torch_cuda_baddbmm_out") s.a = static_cast<int64_t>(Extern::BaddbmmOut), kinds = "hhhhdd";
        else if (name == "aoti_torch_cuda_convolution") s.a = static_cast<int64_t>(Extern::Convolution), kinds = "hhoaaabair";
        else bad_plan("extern " + name);
        const int64_t n = num(2);
        if (n != static_cast<int64_t>(std::strlen(kinds))) bad_plan("arguments of " + name);
        for (int64_t i = 0; i < n; ++i) {
          const std::string& a = w.at(3 + i);
          if (a.size() < 2 || a[0] != kinds[i] || a[1] != ':') bad_plan(a);
          const std::string tail = a.substr(2);
          auto slot = [&] { return checked(std::stoll(tail), plan->slots, "slot"); };
          Arg arg;
          switch (kinds[i]) {
            case 'h': arg.kind = ArgKind::Handle, arg.slot = slot(); break;
            case 'r': arg.kind = ArgKind::Returned, arg.slot = slot(); break;
            case 'o': arg.kind = ArgKind::Optional, arg.slot = tail == "-" ? -1 : slot(); break;
            case 'i': arg.kind = ArgKind::I64, arg.value = parse_expr(tail, *plan); break;
            case 'b': arg.kind = ArgKind::I32, arg.value = parse_expr(tail, *plan); break;
            case 'd': arg.kind = ArgKind::Double, arg.value = parse_expr(tail, *plan); break;
            case 'a': {
              arg.kind = ArgKind::Array;
              std::stringstream values(tail);
              std::string value;
              while (std::getline(values, value, ';')) arg.values.push_back(parse_expr(value, *plan));
              if (arg.values.size() > static_cast<size_t>(kMaxRank)) bad_plan("an array longer than the launcher takes");
              break;
            }
            default: bad_plan(a);
          }
          s.args.push_back(std::move(arg));
        }
      } else if (k == "launch") {
        s.kind = Kind::Launch, s.a = checked(num(1), plan->kernels.size(), "kernel");
        plan->launches = true;
        s.warps = num(2), s.shared = num(3);
        for (int i = 0; i < 3; ++i) s.exprs.push_back(expr_at(4 + i));
        const int64_t n = checked(num(7), kMaxArgs + 1, "argument count");
        for (int64_t i = 0; i < n; ++i) {
          const std::string& a = w.at(8 + i);
          Arg arg;
          const size_t colon = a.find(':');
          const std::string type = a.substr(0, colon);
          if (a == "null") {
            arg.kind = ArgKind::Null;
          } else if (colon == std::string::npos) {
            bad_plan(a);
          } else if (type == "p") {
            arg.kind = ArgKind::Pointer, arg.slot = checked(std::stoll(a.substr(2)), plan->slots, "slot");
          } else {
            static const struct { const char* name; ArgKind kind; } kTypes[] = {
                {"i32", ArgKind::I32}, {"i64", ArgKind::I64}, {"u32", ArgKind::U32},
                {"f32", ArgKind::F32}, {"f64", ArgKind::F64}};
            bool found = false;
            for (const auto& t : kTypes) {
              if (type == t.name) arg.kind = t.kind, found = true;
            }
            if (!found) bad_plan(a);
            arg.value = parse_expr(a.substr(colon + 1), *plan);
          }
          s.args.push_back(std::move(arg));
        }
      } else {
        bad_plan("step " + k);
      }
      plan->steps.push_back(std::move(s));
    }
  }
  // A term I[a] == c goes to `pinned`: a flat array the guard reads first, so a variant
  // that does not apply (another weight shape under the same key) is refused from one or
  // two cache lines instead of the interpreter walking its terms' scattered programs.
  std::vector<Expr> rest;
  for (Expr& check : plan->checks) {
    for (const Op& o : check) {
      if (o.code == Code::GuardInt) plan->guard_ints = std::max(plan->guard_ints, o.a + 1);
      if (o.code == Code::GuardDouble) plan->guard_doubles = std::max(plan->guard_doubles, o.a + 1);
    }
    if (check.size() == 3 && check[2].code == Code::EqI &&
        ((check[0].code == Code::GuardInt && check[1].code == Code::ConstInt) ||
         (check[0].code == Code::ConstInt && check[1].code == Code::GuardInt))) {
      const bool guard_first = check[0].code == Code::GuardInt;
      plan->pinned.emplace_back(check[guard_first ? 0 : 1].a, check[guard_first ? 1 : 0].a);
    } else {
      rest.push_back(std::move(check));
    }
  }
  plan->checks = std::move(rest);
  if (plan->slots > kMaxSlots || plan->ints > kMaxInts || plan->doubles > kMaxDoubles ||
      plan->inputs > plan->slots)
    bad_plan("tables too large");
  return plan;
}

Plan& plan() {
  static Plan* parsed = [] {  // thread-safe once (C++11 statics)
    if (!payload().error.empty()) throw std::runtime_error("eagerc: launch plan not found: " + payload().error);
    Plan* own = parse_plan(payload().plan.c_str());
    own->cubins = payload().cubins;
    return own;
  }();
  return *parsed;
}

Plan* open_plan(const char* path) {
  const Payload other = read_payload(path);
  if (!other.error.empty()) throw std::runtime_error("eagerc: launch plan not found: " + other.error);
  Plan* opened = parse_plan(other.plan.c_str());
  opened->cubins = other.cubins;  // kept for the process's life, as the plan itself
  return opened;
}

}  // namespace eagerc_launcher
