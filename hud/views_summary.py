from django.http import Http404


def summary(request):
    raise Http404("being built")


def metrics(request):
    raise Http404("being built")


def backend(request, org, repo):
    raise Http404("being built")
