// deal.II oracle: the scalar families share one program (see _scalar.h)
#include "_scalar.h"

int main(int argc, char **argv)
{
  return pdebench::guarded_main(argc, argv, pdebench::run_scalar);
}
