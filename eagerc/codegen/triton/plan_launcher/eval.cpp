// A plan's expressions (cexpr.py's typed postfix programs) evaluated with C++'s semantics.
#include <cmath>
#include <limits>

#include "plan.h"

namespace eagerc_launcher {
namespace {

// C++'s arithmetic on int64_t without its undefined cases: overflow wraps, and a division
// by zero (reached only where C++ would have short-circuited around it) gives 0.
int64_t wrap(uint64_t v) { return static_cast<int64_t>(v); }
int64_t div_trunc(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap(0 - static_cast<uint64_t>(a));
  return a / b;
}
int64_t mod_trunc(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
int64_t to_int(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

}  // namespace

Value eval(const Expr& expr, const Env& env) {
  Value stack[kMaxStack];
  int top = -1;  // parse_expr checked the depth and that every operation has its operands
  for (const Op& o : expr) {
    switch (o.code) {  // leaves
      case Code::ConstInt: stack[++top].i = o.a; continue;
      case Code::ConstDouble: stack[++top].d = o.d; continue;
      case Code::Int: stack[++top].i = env.ints[o.a]; continue;
      case Code::Double: stack[++top].d = env.doubles[o.a]; continue;
      case Code::GuardInt: stack[++top].i = env.guard_ints[o.a]; continue;
      case Code::GuardDouble: stack[++top].d = env.guard_doubles[o.a]; continue;
      case Code::Size:
      case Code::Stride: {
        if (env.frame == nullptr) bad_plan("a guard reads a tensor");
        int64_t* values = nullptr;
        EAGERC_CHECK(o.code == Code::Size ? aoti_torch_get_sizes(env.frame->slot(o.a), &values)
                                          : aoti_torch_get_strides(env.frame->slot(o.a), &values));
        stack[++top].i = values[o.b];
        continue;
      }
      default: break;
    }
    Value& y = stack[top];
    switch (o.code) {  // unary: y -> y
      case Code::Not: y.i = !y.i; continue;
      case Code::NegI: y.i = wrap(0 - static_cast<uint64_t>(y.i)); continue;
      case Code::NegD: y.d = -y.d; continue;
      case Code::IntToDouble: y.d = static_cast<double>(y.i); continue;
      case Code::DoubleToInt: y.i = to_int(y.d); continue;
      case Code::DoubleToBool: y.i = y.d != 0.0; continue;
      default: break;
    }
    Value& x = stack[top - 1];
    switch (o.code) {  // binary: x op y -> x
      case Code::AddI: x.i = wrap(static_cast<uint64_t>(x.i) + static_cast<uint64_t>(y.i)); break;
      case Code::SubI: x.i = wrap(static_cast<uint64_t>(x.i) - static_cast<uint64_t>(y.i)); break;
      case Code::MulI: x.i = wrap(static_cast<uint64_t>(x.i) * static_cast<uint64_t>(y.i)); break;
      case Code::DivI: x.i = div_trunc(x.i, y.i); break;
      case Code::ModI: x.i = mod_trunc(x.i, y.i); break;
      case Code::AddD: x.d = x.d + y.d; break;
      case Code::SubD: x.d = x.d - y.d; break;
      case Code::MulD: x.d = x.d * y.d; break;
      case Code::DivD: x.d = x.d / y.d; break;
      case Code::FloorDiv: {  // eagerc_floordiv (guards.py)
        const int64_t q = div_trunc(x.i, y.i);
        x.i = (y.i != 0 && q * y.i != x.i && ((x.i < 0) != (y.i < 0))) ? q - 1 : q;
        break;
      }
      case Code::PyMod: {  // eagerc_mod (guards.py)
        const int64_t r = mod_trunc(x.i, y.i);
        x.i = (r != 0 && ((r < 0) != (y.i < 0))) ? r + y.i : r;
        break;
      }
      case Code::MaxI: x.i = x.i < y.i ? y.i : x.i; break;  // std::max: (a < b) ? b : a
      case Code::MinI: x.i = y.i < x.i ? y.i : x.i; break;  // std::min: (b < a) ? b : a
      case Code::MaxD: x.d = x.d < y.d ? y.d : x.d; break;
      case Code::MinD: x.d = y.d < x.d ? y.d : x.d; break;
      case Code::EqI: x.i = x.i == y.i; break;
      case Code::NeI: x.i = x.i != y.i; break;
      case Code::LtI: x.i = x.i < y.i; break;
      case Code::LeI: x.i = x.i <= y.i; break;
      case Code::GtI: x.i = x.i > y.i; break;
      case Code::GeI: x.i = x.i >= y.i; break;
      case Code::EqD: x.i = x.d == y.d; break;
      case Code::NeD: x.i = x.d != y.d; break;
      case Code::LtD: x.i = x.d < y.d; break;
      case Code::LeD: x.i = x.d <= y.d; break;
      case Code::GtD: x.i = x.d > y.d; break;
      case Code::GeD: x.i = x.d >= y.d; break;
      case Code::And: x.i = x.i && y.i; break;
      case Code::Or: x.i = x.i || y.i; break;
      default: bad_plan("operation");
    }
    --top;
  }
  return stack[0];
}

}  // namespace eagerc_launcher
