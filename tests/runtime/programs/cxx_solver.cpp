// C++: the MPI call sits in a member function of a class in a namespace; its call
// site must be reported demangled as physics::Solver::step(int).
#include <mpi.h>
#include <vector>

namespace physics {
class Solver {
  public:
    explicit Solver(int n) : field(n, 1.0) {}
    double step(int iteration)
    {
        double local = field[iteration % field.size()], global = 0;
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); // @site allreduce
        return global;
    }

  private:
    std::vector<double> field;
};
} // namespace physics

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    physics::Solver s(16);
    double acc = 0;
    for (int i = 0; i < 7; i++)
        acc += s.step(i);
    MPI_Finalize();
    return acc > 0 ? 0 : 1;
}
