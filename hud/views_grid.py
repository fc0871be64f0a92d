from django.http import Http404


def grid(request):
    raise Http404("the grid is being built")


def commit(request, sha):
    raise Http404("being built")


def pull_request(request, number):
    raise Http404("being built")
