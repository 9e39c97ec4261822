// $PATH's folders, for the places that look a program up the way a shell would.
#pragma once

#include <string>
#include <vector>

namespace opcts {

/// The folders of $PATH in order, empty entries left out (an empty $PATH or none gives none).
std::vector<std::string> path_dirs();

}  // namespace opcts
