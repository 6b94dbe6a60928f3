#include "trellis.h"
#include <stdio.h>
int main(void) {
  printf("libtrellis %s\n", trellis_version_string());
  return 0;
}
