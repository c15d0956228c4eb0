// The header from C++: a region around a std::vector sum, exit status 0.
#include <cstdio>
#include <numeric>
#include <perfweave/perfweave.h>
#include <vector>

int main()
{
    std::vector<int> v(1000, 3);
    perfweave_region_begin("cxx-sum");
    long s = std::accumulate(v.begin(), v.end(), 0L);
    perfweave_region_end("cxx-sum");
    std::printf("sum %ld\n", s);
    return 0;
}
