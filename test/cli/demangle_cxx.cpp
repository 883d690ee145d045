// test/cli/demangle_cxx.cpp: a C++ workload whose hot function lives in
// namespaces and a class template (issue 16: demangled names).
//   demangle_cxx SECONDS    prints "ready", then spins in
//   shop::detail::Basket<long>::add(long, int) until SECONDS pass
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace shop {
namespace detail {
template <typename T> struct Basket {
    T total;
    __attribute__((noinline)) T add(T v, int n)
    {
        for (int i = 0; i < n; i++)
            total = total * 31 + v + i;
        return total;
    }
};
} // namespace detail
} // namespace shop

static double now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

volatile long sink;

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1;
    shop::detail::Basket<long> b{0};
    std::puts("ready");
    std::fflush(stdout);
    for (double end = now() + secs; now() < end;)
        sink = b.add(sink, 200000);
    return 0;
}
