// deal.II oracle: elasticity, Stokes and Navier-Stokes share one program (see _vector.h)
#include "_vector.h"

int main(int argc, char **argv)
{
  return pdebench::guarded_main(argc, argv, pdebench::run_vector);
}
